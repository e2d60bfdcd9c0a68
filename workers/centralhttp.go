package workers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/httpserve"
	"github.com/outpost-dev/outpost/internal/outbox"
)

// centralHTTP is what the central worker serves at central.listen: the
// outbox page at /, Prometheus /metrics, /healthz and /readyz.
type centralHTTP struct {
	listener net.Listener
	server   *http.Server
}

// NewDeliveryEvents counts delivery attempts and outcomes by kind as central
// records them in the audit log: once per audit row written (see
// countDeliveryEvents).
func NewDeliveryEvents() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outpost_central_delivery_events_total",
		Help: "Delivery events recorded by central, by kind, event (Enqueued, Attempt, Terminal, OperatorRetry, OperatorDiscard) and status.",
	}, []string{"kind", "event", "status"})
}

// countDeliveryEvents counts in events each audit event of an operation
// the store writes, those a row carries included (ObserveAudit tells of a
// row's events once, when it is written: an event derived again from a
// re-sent tracking row is not). Changes to lists and channels are no
// delivery events.
func countDeliveryEvents(events *prometheus.CounterVec) func([]centralstore.AuditEvent) {
	return func(stored []centralstore.AuditEvent) {
		for _, e := range stored {
			if e.Kind == centralstore.AuditKindList || e.Kind == centralstore.AuditKindChannel {
				continue
			}
			events.WithLabelValues(e.Kind, string(e.Event), string(e.Status)).Inc()
		}
	}
}

func startCentralHTTP(cfg CentralOptions, store *centralstore.Store, tc client.Client,
	registry *prometheus.Registry, events *prometheus.CounterVec, log *zap.Logger) (*centralHTTP, error) {
	page, err := outboxPage(cfg, store, tc, registry, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("central page and metrics: listen on %s (central.listen): %w", cfg.Listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", page)
	mux.Handle("GET /metrics", metricsHandler(store, cfg.StuckAge, registry, events, cfg.Region.Name))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", centralReadyz(store, tc))
	if err := servePprofIfAsked(mux, cfg.Listen); err != nil {
		ln.Close()
		return nil, err
	}
	return &centralHTTP{listener: ln, server: httpserve.Server(mux)}, nil
}

// pprofEnv set to "1" serves Go's profiles at /debug/pprof/ on
// central.listen, to find what holds a worker's memory or CPU (go tool
// pprof http://127.0.0.1:8481/debug/pprof/heap). Off unless set: the
// profiles answer without the page's sign-in.
const pprofEnv = "OUTPOST_PPROF"

// servePprofIfAsked adds the profiles to mux when pprofEnv is "1". A listen
// address reachable beyond this host is refused: anyone who reaches it
// could read the process's stacks and command line.
func servePprofIfAsked(mux *http.ServeMux, listen string) error {
	if os.Getenv(pprofEnv) != "1" {
		return nil
	}
	if !httpserve.IsLoopback(listen) {
		return fmt.Errorf("%s=1 serves /debug/pprof/ without sign-in, and central.listen %q is reachable beyond this host: "+
			"profile a worker listening on 127.0.0.1, or unset %s", pprofEnv, listen, pprofEnv)
	}
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return nil
}

// MetricsHandler is central's GET /metrics: it registers the Go and
// process collectors, events, and the KPI and air-gap collectors (both read
// the central store at scrape time) in registry and serves the registry.
// Exported so `outpost bench` can time a scrape on a big store.
func MetricsHandler(store *centralstore.Store, stuckAge time.Duration, registry *prometheus.Registry, events *prometheus.CounterVec) http.Handler {
	return metricsHandler(store, stuckAge, registry, events, "")
}

// metricsHandler is MetricsHandler of a central worker of region: every
// metric it serves carries the label region="<region>" (none without one),
// so one Prometheus can tell the regions' centrals apart.
func metricsHandler(store *centralstore.Store, stuckAge time.Duration, registry *prometheus.Registry, events *prometheus.CounterVec, region string) http.Handler {
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registry.MustRegister(events)
	registry.MustRegister(&kpiCollector{store: store, stuckAge: stuckAge, lastScrape: time.Now()}, &airgapCollector{store: store})
	var gatherer prometheus.Gatherer = registry
	if region != "" {
		gatherer = withLabel(registry, "region", region)
	}
	return promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})
}

// withLabel gathers g's metrics with the label name=value added to each.
func withLabel(g prometheus.Gatherer, name, value string) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		families, err := g.Gather()
		for _, family := range families {
			for _, m := range family.GetMetric() {
				m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(name), Value: proto.String(value)})
				slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
			}
		}
		return families, err
	})
}

// outboxPage builds the outbox page with its sign-in and codec server, its
// sign-in metric in registry and its log in log. An open page (no
// page_auth) is refused beyond loopback.
func outboxPage(cfg CentralOptions, store *centralstore.Store, tc client.Client, registry prometheus.Registerer, log *zap.Logger) (http.Handler, error) {
	if !httpserve.IsLoopback(cfg.Listen) && cfg.PageAuth.Open() {
		return nil, fmt.Errorf("central.listen %q is reachable beyond this host: configure central.page_auth (users or proxy_header), or anyone who reaches it can retry and discard", cfg.Listen)
	}
	return outbox.New(store, tc, outbox.Options{
		TemporalUIURL: cfg.TemporalUIURL, Namespace: cfg.Namespace, StuckAge: cfg.StuckAge,
		Auth: cfg.PageAuth, CodecOrigins: cfg.CodecOrigins, Codec: cfg.Codec, Hosts: httpserve.HostNames(cfg.Listen, cfg.PageHosts),
		Region: cfg.Region, Log: log, Metrics: registry,
	})
}

func (h *centralHTTP) serve() error {
	if err := h.server.Serve(httpserve.LimitListener(h.listener, httpserve.MaxConnections)); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("central page and metrics: %w", err)
	}
	return nil
}

func (h *centralHTTP) shutdown() error { return httpserve.Shutdown(h.server) }

// centralReadyz answers 200 when the central store and Temporal both
// answer, Temporal reading its database too: the worker can deliver.
// Otherwise 503 and what is wrong.
func centralReadyz(store *centralstore.Store, tc client.Client) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		var problems []error
		if err := store.Ping(ctx); err != nil {
			problems = append(problems, fmt.Errorf("central store: %w", err))
		}
		if _, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			problems = append(problems, fmt.Errorf("temporal: %w", err))
		} else if err := temporalReadsWorkflows(ctx, tc); err != nil {
			problems = append(problems, err)
		}
		if err := errors.Join(problems...); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	}
}

// readyzProbeWorkflowID names no workflow: describing it makes Temporal's
// history service look for it in its database.
const readyzProbeWorkflowID = "outpost-readyz-probe"

// temporalReadsWorkflows says whether Temporal can read workflow state.
// Its frontend answers health checks while its database is down, when no
// task moves: a look-up of a workflow that does not exist, answered "not
// found", proves the database answers.
func temporalReadsWorkflows(ctx context.Context, tc client.Client) error {
	_, err := tc.DescribeWorkflowExecution(ctx, readyzProbeWorkflowID, "")
	var notFound *serviceerror.NotFound
	if err == nil || errors.As(err, &notFound) {
		return nil
	}
	return fmt.Errorf("temporal: its frontend answers but it cannot read workflows, so nothing is delivered until it can (is Temporal's database down?): %w", err)
}

var kpiDescs = struct{ queue, stuck, parked, delivered, deliveredSince, oldest *prometheus.Desc }{
	queue:     prometheus.NewDesc("outpost_central_queue_depth", "Operations Pending or Retrying, by source site and kind.", []string{"site", "kind"}, nil),
	stuck:     prometheus.NewDesc("outpost_central_stuck", "Operations Pending or Retrying for longer than central.stuck_age.", []string{"site", "kind"}, nil),
	parked:    prometheus.NewDesc("outpost_central_parked", "Parked operations waiting for an operator.", []string{"site", "kind"}, nil),
	delivered: prometheus.NewDesc("outpost_central_delivered_last_hour", "Operations delivered in the last hour.", []string{"site", "kind"}, nil),
	deliveredSince: prometheus.NewDesc("outpost_central_delivered_since_last_scrape",
		"Operations delivered since the previous scrape of this worker (the first scrape: since the worker started).", []string{"site", "kind"}, nil),
	oldest: prometheus.NewDesc("outpost_central_oldest_pending_age_seconds", "Age of the oldest Pending or Retrying operation (0 when none).", []string{"site", "kind"}, nil),
}

// kpiCollector computes the KPIs from the central tables at scrape time.
// Series are per site and kind; sum (or max, for the age) across sites for
// the global view.
type kpiCollector struct {
	store    *centralstore.Store
	stuckAge time.Duration

	// mu makes scrapes take turns, so each delivery is counted by one
	// scrape's delivered_since_last_scrape.
	mu sync.Mutex
	// lastScrape is the previous successful scrape's time (the worker's
	// start before the first).
	lastScrape time.Time
}

func (c *kpiCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{kpiDescs.queue, kpiDescs.stuck, kpiDescs.parked, kpiDescs.delivered, kpiDescs.deliveredSince, kpiDescs.oldest} {
		ch <- d
	}
}

func (c *kpiCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	report, err := c.store.KPIs(ctx, centralstore.KPIQuery{Now: now, StuckAge: c.stuckAge, Window: time.Hour, Since: c.lastScrape})
	if err != nil {
		ch <- prometheus.NewInvalidMetric(kpiDescs.queue, err)
		return
	}
	c.lastScrape = now
	for _, site := range report.Sites {
		for _, k := range site.Kinds {
			gauge := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, site.Site, k.Kind)
			}
			gauge(kpiDescs.queue, float64(k.Queue))
			gauge(kpiDescs.stuck, float64(k.Stuck))
			gauge(kpiDescs.parked, float64(k.Parked))
			gauge(kpiDescs.delivered, float64(k.Delivered))
			gauge(kpiDescs.deliveredSince, float64(k.DeliveredSince))
			gauge(kpiDescs.oldest, k.OldestPendingAgeSeconds)
		}
	}
}
