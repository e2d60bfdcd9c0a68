package site

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// /metrics parses as Prometheus text and reports the buffer, the tracking
// rows, telemetry lag and failed hand-offs; /healthz and /readyz answer, and
// the site stays ready with central unreachable, saying so.
func TestDaemonMetricsAndHealthWithCentralDown(t *testing.T) {
	t.Parallel()
	var failWith atomic.Int32
	erp := erpServer(t, &failWith)
	dir := t.TempDir()
	cfg := siteDefinitions(erp.URL, filepath.Join(dir, "historian.db"))
	cfg.Store, cfg.Listen = filepath.Join(dir, "site.db"), "127.0.0.1:0"
	cfg.ForwardInterval, cfg.PollInterval = 200*time.Millisecond, 50*time.Millisecond
	d, ctx := startDaemonCentralDown(t, cfg)
	base := "http://" + d.Addr()

	_, err := d.Client.Notify(ctx, "ops", "Pump 3 tripped", "Pressure low")
	require.NoError(t, err)
	_, err = d.Client.Call(ctx, "erp", "getOrder", map[string]any{"id": 1})
	require.NoError(t, err)
	failWith.Store(http.StatusServiceUnavailable)
	queued, err := d.Client.Call(ctx, "erp", "getOrder", map[string]any{"id": 2})
	require.NoError(t, err)
	require.True(t, queued.Queued())

	var families map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		families = scrape(t, base+"/metrics")
		return value(families, "outpost_site_handoffs_total", map[string]string{"category": sitestore.CategoryNotification, "outcome": "failed"}) > 0
	}, 10*time.Second, 100*time.Millisecond, "failed hand-offs are counted while central is down")
	require.Equal(t, 1.0, value(families, "outpost_site_buffer_depth", map[string]string{"category": sitestore.CategoryNotification}))
	require.Equal(t, 1.0, value(families, "outpost_site_buffer_depth", map[string]string{"category": sitestore.CategoryExternalCall}))
	require.Equal(t, 1.0, value(families, "outpost_site_notification_backlog", nil))
	require.Greater(t, value(families, "outpost_site_buffer_oldest_age_seconds", map[string]string{"category": sitestore.CategoryNotification}), 0.0)
	require.Equal(t, 1.0, value(families, "outpost_site_tracking_rows", map[string]string{"status": "Delivered"}))
	require.Equal(t, 1.0, value(families, "outpost_site_tracking_rows", map[string]string{"status": "Pending"}))
	require.Equal(t, 2.0, value(families, "outpost_site_telemetry_backlog", nil), "two tracking rows central has not seen")
	require.Greater(t, value(families, "outpost_site_telemetry_lag_seconds", nil), 0.0)
	require.Contains(t, families, "go_goroutines", "process metrics too")

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(base + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "a site stays ready while central is unreachable")
	var rd Readiness
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&rd))
	require.True(t, rd.Ready)
	require.Equal(t, "ok", rd.Store)
	require.Contains(t, rd.Central, "unreachable")
}

// scrape reads url with Prometheus's own text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
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

// value is the value of the series of name with exactly labels; -1 when absent.
func value(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	fam, ok := families[name]
	if !ok {
		return -1
	}
	for _, m := range fam.GetMetric() {
		if !sameLabels(m.GetLabel(), labels) {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}
