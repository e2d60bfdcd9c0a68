package workers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/centralstore"
)

// Every metric a region's central serves carries its region, its own
// metrics and the collectors' alike; without a region, no metric has the
// label.
func TestRegionsCentralLabelsEveryMetric(t *testing.T) {
	t.Parallel()
	store, err := centralstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "central.db"))
	require.NoError(t, err)
	defer store.Close()
	scrape := func(region string) []string {
		rec := httptest.NewRecorder()
		metricsHandler(store, time.Minute, prometheus.NewRegistry(), NewDeliveryEvents(), region).
			ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var samples []string
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				samples = append(samples, line)
			}
		}
		require.NotEmpty(t, samples)
		return samples
	}
	eu := scrape("eu")
	for _, s := range eu {
		require.Contains(t, s, `region="eu"`, s)
	}
	require.True(t, slicesContainPrefix(eu, "airgap_bundles_imported_total{"), "central's own metrics are served: %v", eu)
	require.True(t, slicesContainPrefix(eu, "go_goroutines{"), "and the Go collector's: %v", eu)
	for _, s := range scrape("") {
		require.NotContains(t, s, "region=", s)
	}
}

func slicesContainPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}
