package site

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// Daemon is the site daemon: the store, the forwarder and the local HTTP API.
type Daemon struct {
	Client    *Client
	Forwarder *Forwarder
	listener  net.Listener
	server    *http.Server
	log       *zap.Logger
}

// StartDaemon opens the store and binds the API address; Run serves.
func StartDaemon(ctx context.Context, cfg config.Site, tc client.Client, log *zap.Logger) (*Daemon, error) {
	store, err := sitestore.Open(ctx, cfg.Store, nil)
	if err != nil {
		return nil, err
	}
	c := newClient(store, Options{SiteID: cfg.ID, Node: cfg.Node, Temporal: tc, MaxBodyBytes: cfg.MaxBodyBytes})
	fwd := NewForwarder(store, tc, ForwarderOptions{
		Interval: cfg.ForwardInterval, Batch: cfg.ForwardBatch, Parallelism: cfg.ForwardParallelism,
		PollInterval: cfg.PollInterval,
	}, log.Named("forwarder"))
	c.enqueued = fwd.Wake
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("site api: listen on %s (site.listen): %w", cfg.Listen, err)
	}
	return &Daemon{
		Client: c, Forwarder: fwd, listener: ln, log: log,
		server: &http.Server{Handler: NewAPI(c, log.Named("api")), ReadHeaderTimeout: 10 * time.Second},
	}, nil
}

// Addr is the API's bound address.
func (d *Daemon) Addr() string { return d.listener.Addr().String() }

// Run serves the API and forwards until ctx ends, then closes the store.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.Client.Close()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.Forwarder.Run(ctx) })
	g.Go(func() error {
		if err := d.server.Serve(d.listener); !errors.Is(err, http.ErrServerClosed) {
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
