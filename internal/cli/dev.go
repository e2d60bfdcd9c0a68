package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/internal/cluster"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/demosystem"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/logging"
	"github.com/outpost-dev/outpost/internal/payloadcipher"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

var devCommand = command{
	name:    "dev",
	summary: "run the whole system on this machine",
	usage:   "[--config FILE] [--cluster]",
	help: `Starts, in one process tree: the Temporal dev server with its Web UI
(persisting to dev.data_dir), Outpost's search attributes, a central worker on
a SQLite central store, an SMTP sink that keeps and shows what it receives, a
demo external system that can be told to fail, a demo SQLite database, and one
site daemon. Prints the URLs; Ctrl-C stops everything.

Payloads are encrypted in Temporal as in production: without
temporal.encryption_keys in the config, the first run makes a key at
<dev.data_dir>/encryption.key and later runs keep it, and the Web UI decodes
payloads through central's codec server (<central.listen>/codec), so the UI
shows them as it does in production; "temporal workflow show" shows them
with --codec-endpoint http://<central.listen>/codec.

Without --config it runs the dev defaults (site plant-1, list "ops", external
system "demo", database "historian", retries every 10s, parked after 3). With dev.start_temporal: false it uses the
Temporal server at temporal.address; with dev.smtp_sink: false it mails the
SMTP server in central.smtp. The first run builds the pinned Temporal CLI
(about three minutes).

It writes the config it runs with, every default resolved, to
<dev.data_dir>/outpost.yaml; the other commands run in the same folder
without --config read it, so they reach this stack wherever its config moved
it. "outpost config check --dev FILE" checks FILE as this command reads it.

With --cluster it runs on the production shape of Temporal instead of the
dev server: a throwaway PostgreSQL (Debian's postgresql package) and two
Temporal server processes forming one cluster, with production defaults and
mutual TLS on the frontends (certificates generated in its temp folder).
It prints how long the cluster took to start, and the temporal CLI flags
that reach it. The first run builds the pinned server (a few minutes).

Example:
  go run ./cmd/outpost dev
  go run ./cmd/outpost dev --cluster`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		onCluster := fs.Bool("cluster", false, "run on a self-hosted Temporal cluster (PostgreSQL, two server processes, mutual TLS) instead of the dev server")
		return withConfig(fs, args, config.DevDefault(), "config `FILE` read over the dev defaults", func(cfg config.Config, log *zap.Logger) error {
			return runDev(ctx, env, cfg, *onCluster, log)
		})
	},
}

func runDev(ctx context.Context, env Env, cfg config.Config, onCluster bool, log *zap.Logger) error {
	if err := makeDevDirs(cfg); err != nil {
		return err
	}
	if onCluster {
		// The cluster replaces the dev server, whatever dev.start_temporal says.
		cfg.Dev.StartTemporal = false
	}
	dev, err := devSettings(cfg)
	if err != nil {
		return err
	}
	cfg = dev.cfg
	var tc *cluster.Cluster
	if onCluster {
		var stop func()
		if tc, stop, err = startDevCluster(ctx, env, cfg, log); err != nil {
			return err
		}
		defer stop()
		cfg.Temporal = tc.Temporal(0, cfg.Temporal)
	}
	if _, err := writeDevConfig(cfg); err != nil {
		return err
	}
	if cfg.Dev.StartTemporal {
		fmt.Fprintln(env.Stdout, "Starting the Temporal dev server (the first run builds the pinned CLI: about three minutes)...")
		srv, err := devserver.Start(ctx, devserver.Options{
			Address: cfg.Temporal.Address, Namespace: cfg.Temporal.Namespace,
			DBFile: filepath.Join(cfg.Dev.DataDir, "temporal.db"), UIPort: cfg.Dev.TemporalUIPort,
			HTTPPort: dev.temporalPorts.HTTP, MetricsPort: dev.temporalPorts.Metrics,
			UICodecEndpoint: dev.uiCodecEndpoint, Logger: logging.NewTemporal(log.Named("devserver")),
		})
		if err != nil {
			return err
		}
		defer srv.Stop() //nolint:errcheck // the process is going away either way
	}
	g, ctx := errgroup.WithContext(ctx)
	var sinkURL string
	if cfg.Dev.SMTPSink {
		var err error
		if sinkURL, err = startSink(ctx, g, cfg, log); err != nil {
			return err
		}
		defer fmt.Fprintf(env.Stdout, "SMTP sink stopped; it had shown its mail at %s\n", sinkURL)
	}
	if cfg.Dev.DemoSystem != "" {
		if err := startDemoSystem(ctx, g, cfg.Dev.DemoSystem, log); err != nil {
			return err
		}
	}
	if cfg.Dev.DemoDatabase != "" {
		if err := createDemoDatabase(ctx, cfg.Dev.DemoDatabase); err != nil {
			return err
		}
	}
	printStack(env, cfg, tc, sinkURL)
	g.Go(func() error { return runCentral(ctx, cfg, log.Named("central")) })
	g.Go(func() error { return runSite(ctx, cfg, log) })
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// devKeyFile, under dev.data_dir, holds the key `outpost dev` encrypts
// payloads with when the config names none.
const (
	devKeyFile = "encryption.key"
	devKeyID   = "dev"
)

// devStack is the config `outpost dev` runs and what it tells the Web UI.
type devStack struct {
	cfg config.Config
	// uiCodecEndpoint is central's codec server, which the dev Web UI
	// decodes payloads through.
	uiCodecEndpoint string
	// temporalPorts are the dev server's ports (when it starts one).
	temporalPorts devserver.Ports
}

// devSettings makes the dev stack encrypt as production does: a config
// without temporal.encryption_keys gets the dev key (devKey), the Web UI
// decodes through central's codec server, and the page links to, and lets
// the codec server be called from, the dev Web UI.
func devSettings(cfg config.Config) (devStack, error) {
	if len(cfg.Temporal.EncryptionKeys) == 0 {
		key, err := devKey(cfg.Dev.DataDir)
		if err != nil {
			return devStack{}, err
		}
		cfg.Temporal.EncryptionKeys = []config.EncryptionKey{key}
	}
	var ports devserver.Ports
	if cfg.Dev.StartTemporal {
		var err error
		if ports, err = devTemporalPorts(cfg); err != nil {
			return devStack{}, err
		}
		cfg.Dev.TemporalUIPort = ports.UI
		cfg.Central.TemporalUIURL = devUIURL(cfg)
	}
	return devStack{cfg: cfg, uiCodecEndpoint: "http://" + cfg.Central.Listen + "/codec", temporalPorts: ports}, nil
}

// devUIURL is the address of the dev server's Web UI.
func devUIURL(cfg config.Config) string {
	host, _, _ := net.SplitHostPort(cfg.Temporal.Address)
	return "http://" + net.JoinHostPort(host, strconv.Itoa(cfg.Dev.TemporalUIPort))
}

// devKey is the dev stack's payload key in dir, made on the first run and
// kept, so the histories the dev server stores stay readable on the next.
func devKey(dir string) (config.EncryptionKey, error) {
	key := config.EncryptionKey{ID: devKeyID, File: filepath.Join(dir, devKeyFile)}
	secret, err := payloadcipher.NewSecret()
	if err != nil {
		return key, err
	}
	f, err := os.OpenFile(key.File, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return key, nil
	}
	if err != nil {
		return key, fmt.Errorf("dev stack: create the payload key %s: %w", key.File, err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return key, fmt.Errorf("dev stack: write the payload key %s: %w", key.File, err)
	}
	if err := f.Close(); err != nil {
		return key, fmt.Errorf("dev stack: write the payload key %s: %w", key.File, err)
	}
	return key, nil
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

// startDemoSystem runs the demo external system until ctx ends.
func startDemoSystem(ctx context.Context, g *errgroup.Group, addr string, log *zap.Logger) error {
	demo, err := demosystem.Start(addr)
	if err != nil {
		return fmt.Errorf("%w (dev.demo_system)", err)
	}
	demo.OnRequest(func(r demosystem.Request) {
		log.Info("demo system received", zap.String("method", r.Method), zap.String("path", r.Path), zap.Int("status", r.Status))
	})
	g.Go(func() error {
		<-ctx.Done()
		return demo.Close()
	})
	return nil
}

// createDemoDatabase makes the SQLite file cached writes go to in the demo.
func createDemoDatabase(ctx context.Context, path string) error {
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		return fmt.Errorf("demo database (dev.demo_database): %w", err)
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS readings (
		tag TEXT NOT NULL, value REAL NOT NULL, at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)`)
	if err != nil {
		return fmt.Errorf("demo database %s: create table readings: %w", path, err)
	}
	return nil
}

// makeDevDirs creates the data folder and the folders of the files the dev
// stack writes, wherever a config file put them.
func makeDevDirs(cfg config.Config) error {
	dirs := []string{cfg.Dev.DataDir, filepath.Dir(cfg.Site.Store)}
	if cfg.Central.Store.Driver == config.DriverSQLite {
		dirs = append(dirs, filepath.Dir(cfg.Central.Store.Path))
	}
	if cfg.Dev.DemoDatabase != "" {
		dirs = append(dirs, filepath.Dir(cfg.Dev.DemoDatabase))
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("dev stack: create folder %s: %w", dir, err)
		}
	}
	return nil
}

// startDevCluster starts the Temporal cluster in a fresh temp folder; stop
// ends it and removes the folder: it is throwaway. A temp folder, not
// dev.data_dir: when run as root, PostgreSQL runs as the postgres user,
// which may reach folders under the temp folder only.
func startDevCluster(ctx context.Context, env Env, cfg config.Config, log *zap.Logger) (c *cluster.Cluster, stop func(), err error) {
	dir, err := os.MkdirTemp("", "outpost-dev-cluster-")
	if err != nil {
		return nil, nil, fmt.Errorf("dev stack: cluster folder: %w", err)
	}
	fmt.Fprintf(env.Stdout, "Starting a Temporal cluster of %d server processes on PostgreSQL in %s (the first run builds the pinned server: a few minutes)...\n", cluster.Nodes, dir)
	begin := time.Now()
	c, err = cluster.Start(ctx, cluster.Options{Dir: dir, Namespace: cfg.Temporal.Namespace, Logger: log.Named("cluster")})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	fmt.Fprintf(env.Stdout, "Temporal cluster started in %s (%s with the build of the pinned tools)\n",
		c.StartupTime.Round(100*time.Millisecond), time.Since(begin).Round(100*time.Millisecond))
	stop = func() {
		c.Stop()
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("dev stack: remove the cluster folder", zap.String("dir", dir), zap.Error(err))
		}
	}
	return c, stop, nil
}

func printStack(env Env, cfg config.Config, tc *cluster.Cluster, sinkURL string) {
	w := env.Stdout
	fmt.Fprintln(w, "\nOutpost dev stack")
	if tc != nil {
		tls := tc.TLS()
		fmt.Fprintf(w, "  Temporal cluster  frontends %s (namespace %s; %d server processes on PostgreSQL, mutual TLS)\n",
			strings.Join(tc.Frontends(), " and "), cfg.Temporal.Namespace, cluster.Nodes)
		fmt.Fprintf(w, "  Temporal CLI      temporal workflow list --address %s --namespace %s --tls-ca-path %s --tls-cert-path %s --tls-key-path %s --tls-server-name %s\n",
			cfg.Temporal.Address, cfg.Temporal.Namespace, tls.CAFile, tls.CertFile, tls.KeyFile, tls.ServerName)
	} else {
		fmt.Fprintf(w, "  Temporal gRPC     %s (namespace %s)\n", cfg.Temporal.Address, cfg.Temporal.Namespace)
	}
	if cfg.Dev.StartTemporal {
		fmt.Fprintf(w, "  Temporal Web UI   %s (payloads decoded through http://%s/codec)\n", devUIURL(cfg), cfg.Central.Listen)
		fmt.Fprintf(w, "  Temporal ports    %s\n", temporalPortsLine(cfg))
	}
	fmt.Fprintf(w, "  Outbox page       http://%s (and /metrics, /healthz, /readyz)\n", cfg.Central.Listen)
	fmt.Fprintf(w, "  Site API          http://%s (site %s; /metrics, /healthz, /readyz)\n", cfg.Site.Listen, cfg.Site.ID)
	fmt.Fprintf(w, "  SMTP              %s:%d\n", cfg.Central.SMTP.Host, cfg.Central.SMTP.Port)
	if sinkURL != "" {
		fmt.Fprintf(w, "  SMTP sink mail    %s\n", sinkURL)
	}
	if cfg.Dev.DemoSystem != "" {
		fmt.Fprintf(w, "  Demo system       http://%s (make it fail: curl -XPOST 'http://%s/control/fail?n=3&status=503')\n", cfg.Dev.DemoSystem, cfg.Dev.DemoSystem)
	}
	if cfg.Dev.DemoDatabase != "" {
		fmt.Fprintf(w, "  Demo database     %s (table readings)\n", cfg.Dev.DemoDatabase)
	}
	if keys := cfg.Temporal.EncryptionKeys; len(keys) > 0 {
		where := keys[0].File
		if where == "" {
			where = "$" + keys[0].Env
		}
		fmt.Fprintf(w, "  Payload key       %s (payloads are encrypted in Temporal, as in production)\n", where)
	}
	fmt.Fprintf(w, "  Data              %s\n\n", cfg.Dev.DataDir)
	fmt.Fprintf(w, "Try: curl -s -XPOST http://%s/v1/notifications -H 'Content-Type: application/json' -d '{\"list\":\"ops\",\"subject\":\"Pump 3 tripped\",\"body\":\"Pressure low\"}'\n", cfg.Site.Listen)
	if _, ok := cfg.Site.ExternalSystems["demo"]; ok {
		fmt.Fprintf(w, "     curl -s -XPOST http://%s/v1/calls -H 'Content-Type: application/json' -d '{\"system\":\"demo\",\"method\":\"createOrder\",\"params\":{\"sku\":\"P-100\"}}'\n", cfg.Site.Listen)
	}
	if _, ok := cfg.Site.Databases["historian"]; ok {
		fmt.Fprintf(w, "     curl -s -XPOST http://%s/v1/writes -H 'Content-Type: application/json' -d '{\"connection\":\"historian\",\"sql\":\"INSERT INTO readings (tag, value) VALUES (?, ?)\",\"args\":[\"pump-3.pressure\",4.2]}'\n", cfg.Site.Listen)
	}
	fmt.Fprintln(w, "Ctrl-C stops everything.")
}
