package workers

import (
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	sdktally "go.temporal.io/sdk/contrib/tally"
)

// CentralMetrics is the central worker's Prometheus registry, shared by the
// Temporal SDK's own metrics (task latencies, poll and schedule-to-start
// times, failures) and Outpost's. Create it before the Temporal client: the
// SDK takes its handler at dial time.
type CentralMetrics struct {
	Registry *prometheus.Registry
	// SDK goes in client.Options.MetricsHandler.
	SDK    client.MetricsHandler
	closer io.Closer
}

// NewCentralMetrics returns a registry with the SDK's metrics (named
// temporal_*) reporting into it.
func NewCentralMetrics() *CentralMetrics {
	registry := prometheus.NewRegistry()
	// NewReporter, not Configuration.NewReporter: the latter also mounts
	// /metrics on http.DefaultServeMux, once per process.
	reporter := tallyprom.NewReporter(tallyprom.Options{Registerer: registry, DefaultTimerType: tallyprom.HistogramTimerType})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  reporter,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &sdktally.PrometheusSanitizeOptions,
	}, time.Second)
	return &CentralMetrics{
		Registry: registry,
		SDK:      sdktally.NewMetricsHandler(sdktally.NewPrometheusNamingScope(scope)),
		closer:   closer,
	}
}

// Close stops reporting SDK metrics.
func (m *CentralMetrics) Close() error { return m.closer.Close() }
