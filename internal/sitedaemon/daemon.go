// Package sitedaemon is the site daemon, `outpost site`: it opens the site
// store, serves the local HTTP API with a site.Client, hands buffered
// operations to central (the forwarder), reports tracking changes
// (telemetry), runs the site's Temporal worker and its own retries while
// central is away, purges old tracking rows, and serves metrics and health.
package sitedaemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/internal/httpserve"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/site/temporalcentral"
)

// Daemon is the site daemon: the store, the forwarder, the local HTTP API,
// the Temporal worker on the site's task queue, telemetry and the purge of
// old tracking rows.
type Daemon struct {
	Client    *site.Client
	Forwarder *Forwarder
	Telemetry *Telemetry
	store     *sitestore.Store
	targets   *targets.Registry
	calls     *targetexec.Executor
	opts      Options
	temporal  client.Client
	listener  net.Listener
	server    *http.Server
	log       *zap.Logger
	// role decides whether this daemon acts for its site: hold (one
	// daemon per site id) or pair (a node of an active/standby pair).
	role siteRole
	hold *siteHold
	pair *pair
}

// siteRole is how a daemon knows whether it acts for its site.
type siteRole interface {
	// admit refuses a new operation when this daemon does not act for the site.
	admit() error
	// describe is the role as /readyz says it.
	describe() (active bool, text string)
	collectors() []prometheus.Collector
}

// StartDaemon opens the store and binds the API address; Run serves.
// traces (nil: none) receives the API's and the hand-offs' spans.
func StartDaemon(ctx context.Context, opts Options, tc client.Client, traces trace.TracerProvider, log *zap.Logger) (*Daemon, error) {
	tokens, err := tokenValues(opts)
	if err != nil {
		return nil, err
	}
	store, err := sitestore.Open(ctx, opts.Store, sitestore.Options{CommitBatch: opts.CommitBatch, CommitDelay: opts.CommitDelay})
	if err != nil {
		return nil, err
	}
	d := &Daemon{store: store, opts: opts, temporal: tc, log: log}
	if opts.Peer.Address != "" {
		d.pair, err = startPair(ctx, opts, store, log.Named("pair"))
		d.role = d.pair
	} else {
		d.hold, err = holdSite(ctx, opts, store, tc, log.Named("holder"))
		d.role = d.hold
	}
	if err != nil {
		store.Close()
		return nil, err
	}
	reg := targets.New(opts.ExternalSystems, opts.Databases)
	calls := targetexec.New(reg)
	fwd := NewForwarder(store, reg, tc, ForwarderOptions{
		Interval: opts.ForwardInterval, Batch: opts.ForwardBatch, Parallelism: opts.ForwardParallelism, MaxInFlight: opts.ForwardMaxInFlight,
		PollInterval: opts.PollInterval, RedactFields: opts.RedactFields, HideSubject: opts.HideSubject, Traces: traces,
		Region: opts.Region,
	}, log.Named("forwarder"))
	c := site.New(store, reg, calls, site.Options{
		SiteID: opts.ID, Node: opts.Node, Central: temporalcentral.NewInRegion(tc, opts.Region), MaxBodyBytes: opts.MaxBodyBytes, OnEnqueue: fwd.Wake, Admit: d.role.admit,
	})
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("site api: listen on %s (site.listen): %w", opts.Listen, err)
	}
	api := APIOptions{Hosts: httpserve.HostNames(opts.Listen, opts.APIHosts), Tokens: tokens, RedactFields: opts.RedactFields, Traces: traces}
	handler := daemonHandler(c, store, tc, fwd, d.role, api, opts.MetricsNeedToken, log)
	if d.pair != nil {
		handler = withPairEndpoints(handler, d.pair, api.Tokens, log.Named("pair"))
	}
	if d.server, err = apiServer(opts, handler); err != nil {
		ln.Close()
		c.Close()
		return nil, err
	}
	d.Client, d.Forwarder, d.targets, d.calls, d.listener = c, fwd, reg, calls, ln
	d.Telemetry = NewTelemetry(store, tc, TelemetryOptions{SiteID: opts.ID, Region: opts.Region, Batch: opts.TelemetryBatch, Delay: opts.TelemetryDelay}, log.Named("telemetry"))
	return d, nil
}

// withPairEndpoints adds the peer endpoints (the pair's secret) and GET
// /v1/pair (an API token) to h.
func withPairEndpoints(h http.Handler, p *pair, tokens map[string]string, log *zap.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("/v1/peer/", peerHandler(p, p.peer.secret, log))
	mux.Handle("GET /v1/pair", requireToken(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, p.status(r.Context()))
	}), tokens))
	return mux
}

// holdSite looks at the site's task queue and takes this daemon's first
// role (siteHold): its identity names the store file, read from it, and
// the time it started.
func holdSite(ctx context.Context, opts Options, store *sitestore.Store, tc client.Client, log *zap.Logger) (*siteHold, error) {
	storeID, err := store.StoreID(ctx)
	if err != nil {
		return nil, fmt.Errorf("site store %s: %w", opts.Store, err)
	}
	self := daemonIdentity{site: opts.ID, node: opts.Node, store: storeID, started: time.Now()}
	hold := newSiteHold(newPollerWatch(tc, self, opts.HolderGrace, log), store, log)
	hold.start(ctx)
	return hold, nil
}

// apiServer is the HTTP server of h, over TLS when site.tls_cert_file and
// tls_key_file are set (reloaded when they change).
func apiServer(opts Options, h http.Handler) (*http.Server, error) {
	server := httpserve.Server(h)
	if opts.TLSCertFile != "" {
		certs, err := httpserve.NewCertificates(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return nil, err
		}
		server.TLSConfig = certs.TLSConfig()
	}
	return server, nil
}

// daemonHandler serves the API, /metrics, /healthz and /readyz.
// /metrics asks for a token when metricsNeedToken is set; the probes never do.
func daemonHandler(c *site.Client, store *sitestore.Store, tc client.Client, fwd *Forwarder, role siteRole, api APIOptions, metricsNeedToken bool, log *zap.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", NewAPI(c, api, log.Named("api")))
	registry := newMetricsRegistry(store, fwd, time.Now)
	registry.MustRegister(role.collectors()...)
	var metrics http.Handler = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	if metricsNeedToken {
		metrics = requireToken(metrics, api.Tokens)
	}
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", readyz(store, tc, fwd, role))
	return mux
}

// serve serves the API on the listener, over TLS when configured.
func (d *Daemon) serve() error {
	ln := httpserve.LimitListener(d.listener, httpserve.MaxConnections)
	if d.server.TLSConfig != nil {
		return d.server.ServeTLS(ln, "", "")
	}
	return d.server.Serve(ln)
}

// Addr is the API's bound address.
func (d *Daemon) Addr() string { return d.listener.Addr().String() }

// Run serves the API, forwards, delivers, reports and purges until ctx
// ends, then closes the store. A pair's node does the site's work only
// while it is active.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.Client.Close()
	g, ctx := errgroup.WithContext(ctx)
	if d.pair != nil {
		g.Go(func() error { return d.pair.run(ctx) })
		g.Go(func() error { return d.pair.replicate(ctx) })
		g.Go(func() error { return d.workWhileActive(ctx) })
	} else {
		g.Go(func() error { return d.work(ctx, d.hold) })
	}
	g.Go(func() error {
		if err := d.serve(); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("site api: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		return httpserve.Shutdown(d.server)
	})
	return g.Wait()
}

// work forwards, reports, purges, runs the site worker (as role says) and
// retries on the site until ctx ends.
func (d *Daemon) work(ctx context.Context, role workerRole) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Forwarder.Run(ctx) })
	g.Go(func() error { return d.Telemetry.Run(ctx) })
	g.Go(func() error {
		return runPurge(ctx, d.store, d.opts.TrackingRetention, d.opts.PurgeInterval, time.Now, d.log.Named("purge"))
	})
	// One SiteActivities for the worker and the site's own retries: they
	// share its per-call locks.
	acts := &onsite.SiteActivities{Store: d.store, Targets: d.targets, Executor: d.calls, Node: d.opts.Node}
	sw := &siteWorker{tc: d.temporal, siteID: d.opts.ID, region: d.opts.Region, acts: acts, reconcileEvery: d.opts.ReconcileInterval, log: d.log.Named("worker")}
	g.Go(func() error { return runWorker(ctx, sw, role, d.opts.PollerCheckInterval, d.opts.ForwardInterval) })
	g.Go(func() error { return runLocalRetries(ctx, d.store, acts, time.Second, d.log.Named("retries")) })
	return g.Wait()
}

// workWhileActive does the site's work while this node of a pair is
// active, and stops all of it at once when the node steps down.
func (d *Daemon) workWhileActive(ctx context.Context) error {
	for {
		role, changed := d.pair.current()
		if role != pairActive {
			select {
			case <-ctx.Done():
				return nil
			case <-changed:
				continue
			}
		}
		workCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- d.work(workCtx, d.pair) }()
		select {
		case <-ctx.Done():
		case <-changed:
		}
		stop()
		if err := <-done; err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// PairStatus is this node's view of its pair (GET /v1/pair); false when
// the daemon runs alone.
func (d *Daemon) PairStatus(ctx context.Context) (PairStatus, bool) {
	if d.pair == nil {
		return PairStatus{}, false
	}
	return d.pair.status(ctx), true
}

// ApplyLags are, on a standby, the times from commit on the active node to
// applied here of the latest changes (at least the last 65,536), oldest first.
func (d *Daemon) ApplyLags() []time.Duration {
	if d.pair == nil {
		return nil
	}
	d.pair.mu.Lock()
	defer d.pair.mu.Unlock()
	return append([]time.Duration(nil), d.pair.applyLags...)
}
