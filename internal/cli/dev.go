package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/logging"
	"github.com/outpost-dev/outpost/internal/smtpsink"
)

var devCommand = command{
	name:    "dev",
	summary: "run the whole system on this machine",
	usage:   "[--config FILE]",
	help: `Starts, in one process tree: the Temporal dev server with its Web UI
(persisting to dev.data_dir), Outpost's search attributes, a central worker on
a SQLite central store, an SMTP sink that keeps and shows what it receives,
and one site daemon. Prints the URLs; Ctrl-C stops everything.

Without --config it runs the dev defaults (site plant-1, list "ops", SMTP
retries every 10s, parked after 3). With dev.start_temporal: false it uses the
Temporal server at temporal.address; with dev.smtp_sink: false it mails the
SMTP server in central.smtp. The first run builds the pinned Temporal CLI
(about three minutes).

Example:
  go run ./cmd/outpost dev`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		return withConfig(fs, args, config.DevDefault(), "config `FILE` read over the dev defaults", func(cfg config.Config, log *zap.Logger) error {
			return runDev(ctx, env, cfg, log)
		})
	},
}

func runDev(ctx context.Context, env Env, cfg config.Config, log *zap.Logger) error {
	if err := os.MkdirAll(cfg.Dev.DataDir, 0o755); err != nil {
		return fmt.Errorf("create dev data dir: %w", err)
	}
	if cfg.Dev.StartTemporal {
		fmt.Fprintln(env.Stdout, "Starting the Temporal dev server (the first run builds the pinned CLI: about three minutes)...")
		srv, err := devserver.Start(ctx, devserver.Options{
			Address: cfg.Temporal.Address, Namespace: cfg.Temporal.Namespace,
			DBFile: filepath.Join(cfg.Dev.DataDir, "temporal.db"), UIPort: cfg.Dev.TemporalUIPort,
			Logger: logging.NewTemporal(log.Named("devserver")),
		})
		if err != nil {
			return err
		}
		defer srv.Stop() //nolint:errcheck // the process is going away either way
	}
	g, ctx := errgroup.WithContext(ctx)
	if cfg.Dev.SMTPSink {
		sinkURL, err := startSink(ctx, g, cfg, log)
		if err != nil {
			return err
		}
		defer fmt.Fprintf(env.Stdout, "SMTP sink stopped; it had shown its mail at %s\n", sinkURL)
		printStack(env, cfg, sinkURL)
	} else {
		printStack(env, cfg, "")
	}
	g.Go(func() error { return runCentral(ctx, cfg, log.Named("central")) })
	g.Go(func() error { return runSite(ctx, cfg, log) })
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// startSink runs the SMTP sink at central.smtp's address and its page at dev.sink_http.
func startSink(ctx context.Context, g *errgroup.Group, cfg config.Config, log *zap.Logger) (string, error) {
	sink, err := smtpsink.Start(net.JoinHostPort(cfg.Central.SMTP.Host, strconv.Itoa(cfg.Central.SMTP.Port)))
	if err != nil {
		return "", err
	}
	sink.OnEmail(func(m smtpsink.Message) {
		log.Info("smtp sink received", zap.String("notificationId", m.NotificationID),
			zap.Strings("to", m.To), zap.String("subject", m.Subject))
	})
	ln, err := net.Listen("tcp", cfg.Dev.SinkHTTP)
	if err != nil {
		sink.Close()
		return "", fmt.Errorf("smtp sink page: listen on %s (dev.sink_http): %w", cfg.Dev.SinkHTTP, err)
	}
	page := &http.Server{Handler: sink, ReadHeaderTimeout: 10 * time.Second}
	g.Go(func() error {
		<-ctx.Done()
		sink.Close()
		return page.Close()
	})
	g.Go(func() error {
		if err := page.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("smtp sink page: %w", err)
		}
		return nil
	})
	return "http://" + ln.Addr().String(), nil
}

func printStack(env Env, cfg config.Config, sinkURL string) {
	w := env.Stdout
	fmt.Fprintln(w, "\nOutpost dev stack")
	fmt.Fprintf(w, "  Temporal gRPC     %s (namespace %s)\n", cfg.Temporal.Address, cfg.Temporal.Namespace)
	if cfg.Dev.StartTemporal {
		host, _, _ := net.SplitHostPort(cfg.Temporal.Address)
		fmt.Fprintf(w, "  Temporal Web UI   http://%s\n", net.JoinHostPort(host, strconv.Itoa(cfg.Dev.TemporalUIPort)))
	}
	fmt.Fprintf(w, "  Site API          http://%s (site %s)\n", cfg.Site.Listen, cfg.Site.ID)
	fmt.Fprintf(w, "  SMTP              %s:%d\n", cfg.Central.SMTP.Host, cfg.Central.SMTP.Port)
	if sinkURL != "" {
		fmt.Fprintf(w, "  SMTP sink mail    %s\n", sinkURL)
	}
	fmt.Fprintf(w, "  Data              %s\n\n", cfg.Dev.DataDir)
	fmt.Fprintf(w, "Try: curl -s -XPOST http://%s/v1/notifications -d '{\"list\":\"ops\",\"subject\":\"Pump 3 tripped\",\"body\":\"Pressure low\"}'\n", cfg.Site.Listen)
	fmt.Fprintln(w, "Ctrl-C stops everything.")
}
