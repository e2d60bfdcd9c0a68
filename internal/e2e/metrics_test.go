package e2e

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/workflows"
)

// Central's and the site's /metrics parse as Prometheus text and show the
// KPIs, delivery events and audit health; /healthz and /readyz answer.
func TestCentralAndSiteMetricsAndHealth(t *testing.T) {
	s := newStack(t, nil)
	delivered := s.notify("ops", "metrics check")
	s.waitStatus(workflows.StatusDelivered, 30*time.Second, delivered)
	s.demo.FailNext(-1, http.StatusServiceUnavailable)
	parked, code := s.call("erp", "createOrder", map[string]any{"sku": "metrics"})
	require.Equal(t, http.StatusAccepted, code)
	s.waitMirror(parked.ID, workflows.StatusParked)

	var central map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		central = scrapeMetrics(t, s.centralURL+"/metrics")
		return metricValue(central, "outpost_central_parked", map[string]string{"site": "plant-1", "kind": workflows.KindExternalCall}) == 1
	}, 30*time.Second, 200*time.Millisecond, "the parked call shows in the KPIs")
	require.Equal(t, 1.0, metricValue(central, "outpost_central_delivered_last_hour", map[string]string{"site": "plant-1", "kind": workflows.KindNotification}))
	require.Equal(t, 0.0, metricValue(central, "outpost_central_queue_depth", map[string]string{"site": "plant-1", "kind": workflows.KindNotification}))
	require.GreaterOrEqual(t, metricValue(central, "outpost_central_delivery_events_total",
		map[string]string{"kind": workflows.KindNotification, "event": "Terminal", "status": "Delivered"}), 1.0)
	require.GreaterOrEqual(t, metricValue(central, "outpost_central_delivery_events_total",
		map[string]string{"kind": workflows.KindExternalCall, "event": "Terminal", "status": "Parked"}), 1.0)
	require.Equal(t, 0.0, metricValue(central, "outpost_central_audit_write_failures_total", nil))

	site := scrapeMetrics(t, s.siteURL+"/metrics")
	require.Equal(t, 1.0, metricValue(site, "outpost_site_tracking_rows", map[string]string{"status": "Parked"}))
	require.GreaterOrEqual(t, metricValue(site, "outpost_site_handoffs_total", map[string]string{"category": "Notification", "outcome": "acked"}), 1.0)

	for _, url := range []string{s.centralURL + "/healthz", s.centralURL + "/readyz", s.siteURL + "/healthz", s.siteURL + "/readyz"} {
		resp, err := http.Get(url)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, url)
	}
	s.stopTemporal()
	resp, err := http.Get(s.centralURL + "/readyz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "central is not ready without Temporal")
	require.Contains(t, string(body), "temporal")
}

// scrapeMetrics reads url with Prometheus's own text parser.
func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	require.NoError(t, err, "metrics must parse as Prometheus text:\n%s", body)
	return families
}

// metricValue is the value of the series of name with exactly labels; -1 when absent.
func metricValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	fam, ok := families[name]
	if !ok {
		return -1
	}
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			match = match && labels[l.GetName()] == l.GetValue()
		}
		if !match {
			continue
		}
		if m.Gauge != nil {
			return m.GetGauge().GetValue()
		}
		return m.GetCounter().GetValue()
	}
	return -1
}
