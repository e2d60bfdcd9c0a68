package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/tracing"
	"github.com/outpost-dev/outpost/workers"
)

var centralCommand = command{
	name:    "central",
	summary: "run the central worker (task queue outpost-central)",
	usage:   "--config FILE",
	help: `Runs the central Temporal worker: notification delivery over SMTP, the
orchestration of cached calls (their retries run on each site's worker), and
the site_calls mirror fed by site telemetry and reconciliation. Registers
Outpost's search attributes in the namespace if they are missing. Secrets
come from the variables named in the config (OUTPOST_SMTP_PASSWORD,
OUTPOST_DB_PASSWORD, OUTPOST_TEMPORAL_API_KEY). temporal.encryption_keys
encrypts every payload in Temporal; every site and the CLI need the same keys.
Without them central logs a warning at start: payloads are plain text in
Temporal's history (config check --production reports it too).
Each site's reconciliation also settles operations whose workflows were
terminated (Discarded).

The outbox page (central.listen) asks nobody to sign in unless
central.page_auth names users (bcrypt hashes from "outpost central
hash-password", role operator or viewer) or an authenticating proxy's header;
central refuses a listen beyond loopback without it. With encryption keys,
/codec/decode on the same listener is the codec server for the Web UI.

telemetry.otlp_endpoint sends the spans of every workflow and activity
(RunWorkflow, RunActivity: each delivery attempt) to an OpenTelemetry
collector, in the trace of the site API call that buffered the operation.

Example:
  OUTPOST_SMTP_PASSWORD=... outpost central --config /etc/outpost/outpost.yaml`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		return withConfigOrDevStack(fs, args, "config `FILE` (omitted: "+devConfigDoc+")", func(cfg config.Config, log *zap.Logger) error {
			warnProductionRisks(log, cfg, productionRisksOf["central"]...)
			return runCentral(ctx, cfg, log)
		})
	},
}

var hashPasswordCommand = command{
	name:    "central hash-password",
	summary: "print the bcrypt hash of a password for central.page_auth.users",
	usage:   "< password",
	help: `Reads a password from the first line of standard input and prints its
bcrypt hash, for central.page_auth.users.<name>.password_hash. The password
is never an argument, so it stays out of shell history and ps.

Example:
  read -rs PW && echo "$PW" | outpost central hash-password`,
	run: func(_ context.Context, env Env, fs *flag.FlagSet, args []string) error {
		if err := parse(fs, args); err != nil {
			return err
		}
		if env.Stdin == nil {
			return errors.New("central hash-password: give the password on standard input")
		}
		line, err := bufio.NewReader(env.Stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("central hash-password: read standard input: %w", err)
		}
		password := strings.TrimRight(line, "\r\n")
		switch {
		case password == "":
			return errors.New("central hash-password: the password on standard input is empty")
		case len(password) > 72:
			return fmt.Errorf("central hash-password: the password is %d bytes; bcrypt uses at most 72", len(password))
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(password), 12)
		if err != nil {
			return fmt.Errorf("central hash-password: %w", err)
		}
		fmt.Fprintln(env.Stdout, string(hash))
		return nil
	},
}

func runCentral(ctx context.Context, cfg config.Config, log *zap.Logger) error {
	metrics := workers.NewCentralMetrics()
	defer metrics.Close()
	traces, err := tracing.Start(ctx, fromconfig.Tracing(cfg.Telemetry), tracing.ServiceCentral)
	if err != nil {
		return err
	}
	defer stopTracing(traces, log)
	tc, err := fromconfig.DialTemporal(cfg.Temporal, log, metrics.SDK, traces)
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := workers.EnsureSearchAttributes(ctx, tc, cfg.Temporal.Namespace, log); err != nil {
		return err
	}
	opts, err := fromconfig.Central(cfg.Central, cfg.Temporal)
	if err != nil {
		return err
	}
	central, err := workers.NewCentral(ctx, opts, tc, metrics.Registry, log)
	if err != nil {
		return err
	}
	log.Info("central worker running", zap.String("temporal", cfg.Temporal.Address),
		zap.String("namespace", cfg.Temporal.Namespace), zap.String("taskQueue", opts.Region.TaskQueue()),
		zap.String("region", opts.Region.Name), zap.String("store", cfg.Central.Store.Driver))
	return central.Run(ctx)
}

// stopTracing sends the spans still batched as the process stops. A
// collector that cannot take them within 5s loses them; the stop goes on.
func stopTracing(traces *tracing.Provider, log *zap.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := traces.Shutdown(ctx); err != nil {
		log.Warn("spans not sent to telemetry.otlp_endpoint", zap.Error(err))
	}
}
