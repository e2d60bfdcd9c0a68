package e2e

import (
	"io"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// Central's and the site's /metrics parse as Prometheus text and show the
// KPIs, delivery events and audit health; /healthz and /readyz answer.
func TestCentralAndSiteMetricsAndHealth(t *testing.T) {
	s := newStack(t, nil)
	delivered := s.notify("ops", "metrics check")
	s.waitStatus(contract.StatusDelivered, 30*time.Second, delivered)
	s.demo.FailNext(-1, http.StatusServiceUnavailable)
	parked, code := s.call("erp", "createOrder", map[string]any{"sku": "metrics"})
	require.Equal(t, http.StatusAccepted, code)
	s.waitMirror(parked.ID, contract.StatusParked)

	var central map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		central = testutil.ScrapeMetrics(t, s.centralURL+"/metrics")
		return testutil.MetricValue(central, "outpost_central_parked", map[string]string{"site": "plant-1", "kind": contract.KindExternalCall}) == 1
	}, 30*time.Second, 200*time.Millisecond, "the parked call shows in the KPIs")
	require.Equal(t, 1.0, testutil.MetricValue(central, "outpost_central_delivered_last_hour", map[string]string{"site": "plant-1", "kind": contract.KindNotification}))
	require.Equal(t, 0.0, testutil.MetricValue(central, "outpost_central_queue_depth", map[string]string{"site": "plant-1", "kind": contract.KindNotification}))
	require.GreaterOrEqual(t, testutil.MetricValue(central, "outpost_central_delivery_events_total",
		map[string]string{"kind": contract.KindNotification, "event": "Terminal", "status": "Delivered"}), 1.0)
	require.GreaterOrEqual(t, testutil.MetricValue(central, "outpost_central_delivery_events_total",
		map[string]string{"kind": contract.KindExternalCall, "event": "Terminal", "status": "Parked"}), 1.0)
	// A delivered notification's first attempt is a local activity of the central worker.
	require.Contains(t, central, "temporal_local_activity_execution_latency_seconds", "the Temporal SDK's own metrics are served too")

	// delivered_since_last_scrape counts from the previous scrape: nothing
	// new, then the one delivered in between, while the hour's count grows.
	noteLabels := map[string]string{"site": "plant-1", "kind": contract.KindNotification}
	central = testutil.ScrapeMetrics(t, s.centralURL+"/metrics")
	require.Equal(t, 0.0, testutil.MetricValue(central, "outpost_central_delivered_since_last_scrape", noteLabels))
	second := s.notify("ops", "metrics check 2")
	s.waitStatus(contract.StatusDelivered, 30*time.Second, second)
	central = testutil.ScrapeMetrics(t, s.centralURL+"/metrics")
	require.Equal(t, 1.0, testutil.MetricValue(central, "outpost_central_delivered_since_last_scrape", noteLabels))
	require.Equal(t, 2.0, testutil.MetricValue(central, "outpost_central_delivered_last_hour", noteLabels))

	site := testutil.ScrapeMetrics(t, s.siteURL+"/metrics")
	require.Equal(t, 1.0, testutil.MetricValue(site, "outpost_site_tracking_rows", map[string]string{"status": "Parked"}))
	require.GreaterOrEqual(t, testutil.MetricValue(site, "outpost_site_handoffs_total", map[string]string{"category": "Notification", "outcome": "acked"}), 1.0)
	require.Equal(t, 0.0, testutil.MetricValue(site, "outpost_site_other_pollers", nil), "one daemon for this site id")

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
