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

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/internal/httpserve"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/site"
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
	opts      Options
	temporal  client.Client
	listener  net.Listener
	server    *http.Server
	log       *zap.Logger
	hold      *siteHold
}

// StartDaemon opens the store and binds the API address; Run serves.
func StartDaemon(ctx context.Context, opts Options, tc client.Client, log *zap.Logger) (*Daemon, error) {
	tokens, err := tokenValues(opts)
	if err != nil {
		return nil, err
	}
	store, err := sitestore.Open(ctx, opts.Store, sitestore.Options{CommitBatch: opts.CommitBatch, CommitDelay: opts.CommitDelay})
	if err != nil {
		return nil, err
	}
	hold, err := holdSite(ctx, opts, store, tc, log.Named("holder"))
	if err != nil {
		store.Close()
		return nil, err
	}
	reg := targets.New(opts.ExternalSystems, opts.Databases)
	fwd := NewForwarder(store, reg, tc, ForwarderOptions{
		Interval: opts.ForwardInterval, Batch: opts.ForwardBatch, Parallelism: opts.ForwardParallelism,
		PollInterval: opts.PollInterval, RedactFields: opts.RedactFields, HideSubject: opts.HideSubject,
	}, log.Named("forwarder"))
	c := site.New(store, reg, site.Options{
		SiteID: opts.ID, Node: opts.Node, Temporal: tc, MaxBodyBytes: opts.MaxBodyBytes, OnEnqueue: fwd.Wake, Admit: hold.admit,
	})
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("site api: listen on %s (site.listen): %w", opts.Listen, err)
	}
	api := APIOptions{Hosts: opts.APIHosts, Tokens: tokens, RedactFields: opts.RedactFields}
	server, err := apiServer(opts, daemonHandler(c, store, tc, fwd, hold, api, opts.MetricsNeedToken, log))
	if err != nil {
		ln.Close()
		c.Close()
		return nil, err
	}
	return &Daemon{
		Client: c, Forwarder: fwd, store: store, targets: reg, opts: opts, temporal: tc, listener: ln, log: log, hold: hold,
		Telemetry: NewTelemetry(store, tc, TelemetryOptions{SiteID: opts.ID, Batch: opts.TelemetryBatch, Delay: opts.TelemetryDelay}, log.Named("telemetry")),
		server:    server,
	}, nil
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
func daemonHandler(c *site.Client, store *sitestore.Store, tc client.Client, fwd *Forwarder, hold *siteHold, api APIOptions, metricsNeedToken bool, log *zap.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", NewAPI(c, api, log.Named("api")))
	registry := newMetricsRegistry(store, fwd.handoffs, time.Now)
	registry.MustRegister(hold.pollers.others, hold.active)
	var metrics http.Handler = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	if metricsNeedToken {
		metrics = requireToken(metrics, api.Tokens)
	}
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", readyz(store, tc, hold))
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
// ends, then closes the store.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.Client.Close()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Forwarder.Run(ctx) })
	g.Go(func() error { return d.Telemetry.Run(ctx) })
	g.Go(func() error {
		return runPurge(ctx, d.store, d.opts.TrackingRetention, d.opts.PurgeInterval, time.Now, d.log.Named("purge"))
	})
	// One SiteActivities for the worker and the site's own retries: they
	// share its per-call locks.
	acts := &onsite.SiteActivities{Store: d.store, Targets: d.targets, Node: d.opts.Node}
	sw := &siteWorker{tc: d.temporal, siteID: d.opts.ID, acts: acts, reconcileEvery: d.opts.ReconcileInterval, log: d.log.Named("worker")}
	g.Go(func() error { return runWorker(ctx, sw, d.hold, d.opts.PollerCheckInterval, d.opts.ForwardInterval) })
	g.Go(func() error { return runLocalRetries(ctx, d.store, acts, time.Second, d.log.Named("retries")) })
	g.Go(func() error {
		if err := d.serve(); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("site api: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return d.server.Shutdown(shutdownCtx)
	})
	return g.Wait()
}
