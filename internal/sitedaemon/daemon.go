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
	"github.com/outpost-dev/outpost/internal/config"
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
	cfg       config.Site
	temporal  client.Client
	listener  net.Listener
	server    *http.Server
	log       *zap.Logger
	identity  string
	pollers   *pollerWatch
}

// StartDaemon opens the store and binds the API address; Run serves.
func StartDaemon(ctx context.Context, cfg config.Site, tc client.Client, log *zap.Logger) (*Daemon, error) {
	tokens, err := cfg.TokenValues()
	if err != nil {
		return nil, err
	}
	store, err := site.OpenStore(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	reg := targets.New(cfg.ExternalSystems, cfg.Databases)
	fwd := NewForwarder(store, reg, tc, ForwarderOptions{
		Interval: cfg.ForwardInterval, Batch: cfg.ForwardBatch, Parallelism: cfg.ForwardParallelism,
		PollInterval: cfg.PollInterval, RedactFields: cfg.RedactFields, HideSubject: cfg.WorkflowSummary == config.SummaryListOnly,
	}, log.Named("forwarder"))
	c := site.New(store, reg, site.Options{
		SiteID: cfg.ID, Node: cfg.Node, Temporal: tc, MaxBodyBytes: cfg.MaxBodyBytes, OnEnqueue: fwd.Wake,
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("site api: listen on %s (site.listen): %w", cfg.Listen, err)
	}
	identity := workerIdentity(cfg.ID, cfg.Node)
	pollers := newPollerWatch(tc, cfg.ID, identity, log.Named("pollers"))
	api := APIOptions{Hosts: cfg.APIHosts, Tokens: tokens, RedactFields: cfg.RedactFields}
	server, err := apiServer(cfg, daemonHandler(c, store, tc, fwd, pollers, api, cfg.MetricsNeedToken, log))
	if err != nil {
		ln.Close()
		c.Close()
		return nil, err
	}
	return &Daemon{
		Client: c, Forwarder: fwd, store: store, targets: reg, cfg: cfg, temporal: tc, listener: ln, log: log, identity: identity, pollers: pollers,
		Telemetry: NewTelemetry(store, tc, TelemetryOptions{SiteID: cfg.ID, Batch: cfg.TelemetryBatch, Delay: cfg.TelemetryDelay}, log.Named("telemetry")),
		server:    server,
	}, nil
}

// apiServer is the HTTP server of h, over TLS when site.tls_cert_file and
// tls_key_file are set (reloaded when they change).
func apiServer(cfg config.Site, h http.Handler) (*http.Server, error) {
	server := httpserve.Server(h)
	if cfg.TLSCertFile != "" {
		certs, err := httpserve.NewCertificates(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, err
		}
		server.TLSConfig = certs.TLSConfig()
	}
	return server, nil
}

// daemonHandler serves the API, /metrics, /healthz and /readyz.
// /metrics asks for a token when metricsNeedToken is set; the probes never do.
func daemonHandler(c *site.Client, store *sitestore.Store, tc client.Client, fwd *Forwarder, pollers *pollerWatch, api APIOptions, metricsNeedToken bool, log *zap.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/", NewAPI(c, api, log.Named("api")))
	registry := newMetricsRegistry(store, fwd.handoffs, time.Now)
	registry.MustRegister(pollers.others)
	var metrics http.Handler = promhttp.HandlerFor(registry, promhttp.HandlerOpts{})
	if metricsNeedToken {
		metrics = requireToken(metrics, api.Tokens)
	}
	mux.Handle("GET /metrics", metrics)
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /readyz", readyz(store, tc))
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
		return runPurge(ctx, d.store, d.cfg.TrackingRetention, d.cfg.PurgeInterval, time.Now, d.log.Named("purge"))
	})
	// One SiteActivities for the worker and the site's own retries: they
	// share its per-call locks.
	acts := &onsite.SiteActivities{Store: d.store, Targets: d.targets, Node: d.cfg.Node}
	g.Go(func() error {
		return runWorker(ctx, d.temporal, d.cfg.ID, d.identity, acts, d.cfg.ReconcileInterval, d.cfg.ForwardInterval, d.log.Named("worker"))
	})
	g.Go(func() error { return runLocalRetries(ctx, d.store, acts, time.Second, d.log.Named("retries")) })
	g.Go(func() error { return d.pollers.run(ctx, d.cfg.PollerCheckInterval) })
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
