package sitedaemon

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// /metrics parses as Prometheus text and reports the buffer, the tracking
// rows, telemetry lag and failed hand-offs; /healthz and /readyz answer, and
// the site stays ready with central unreachable, saying so.
func TestDaemonMetricsAndHealthWithCentralDown(t *testing.T) {
	t.Parallel()
	var failWith atomic.Int32
	cfg := daemonSiteConfig(t, &failWith)
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
		families = testutil.ScrapeMetrics(t, base+"/metrics")
		return testutil.MetricValue(families, "outpost_site_handoffs_total", map[string]string{"category": contract.KindNotification, "outcome": "failed"}) > 0
	}, 10*time.Second, 100*time.Millisecond, "failed hand-offs are counted while central is down")
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_buffer_depth", map[string]string{"category": contract.KindNotification}))
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_buffer_depth", map[string]string{"category": contract.KindExternalCall}))
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_notification_backlog", nil))
	require.Greater(t, testutil.MetricValue(families, "outpost_site_buffer_oldest_age_seconds", map[string]string{"category": contract.KindNotification}), 0.0)
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_tracking_rows", map[string]string{"status": "Delivered"}))
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_tracking_rows", map[string]string{"status": "Pending"}))
	require.Equal(t, 4.0, testutil.MetricValue(families, "outpost_site_telemetry_backlog", nil),
		"four tracking changes central has not seen: each call begun, then attempted")
	require.Greater(t, testutil.MetricValue(families, "outpost_site_telemetry_lag_seconds", nil), 0.0)
	require.GreaterOrEqual(t, testutil.MetricValue(families, "outpost_site_store_commits_total", nil), 4.0,
		"a notification, two calls' begin and outcome, a failed hand-off: each a commit of its own")
	require.Contains(t, families, "go_goroutines", "process metrics too")
	require.Contains(t, families, "outpost_site_clock_lead_seconds")
	require.Zero(t, testutil.MetricValue(families, "outpost_site_clock_lead_seconds", nil), "a clock that was never set back")

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

// The site store's file is deleted under a running daemon: it stops
// answering 202 for work it could only lose, and /readyz says why; the same
// when another file takes the name.
func TestDaemonRefusesWorkWhenItsStoreFileIsGone(t *testing.T) {
	t.Parallel()
	var failWith atomic.Int32
	for _, replace := range []bool{false, true} {
		cfg := daemonSiteConfig(t, &failWith)
		d, ctx := startDaemonCentralDown(t, cfg)
		base := "http://" + d.Addr()
		_, err := d.Client.Notify(ctx, "ops", "before", "")
		require.NoError(t, err)

		for _, suffix := range []string{"", "-wal", "-shm"} {
			require.NoError(t, os.Remove(cfg.Store+suffix))
		}
		if replace {
			require.NoError(t, os.WriteFile(cfg.Store, nil, 0o644))
		}
		_, err = d.Client.Notify(ctx, "ops", "after", "")
		require.ErrorIs(t, err, sqlitedb.ErrReplaced, "replace=%v", replace)

		req, err := http.NewRequest(http.MethodPost, base+"/v1/notifications", strings.NewReader(`{"list":"ops","subject":"after"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode, "not 202: nothing was stored")

		resp, err = http.Get(base + "/readyz")
		require.NoError(t, err)
		var rd Readiness
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&rd))
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		require.False(t, rd.Ready)
		require.Contains(t, rd.Store, "removed or replaced while open")
	}
}
