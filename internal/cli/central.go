package cli

import (
	"context"
	"flag"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/temporalclient"
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
Each site's reconciliation also settles operations whose workflows were
terminated (Discarded).

Example:
  OUTPOST_SMTP_PASSWORD=... outpost central --config /etc/outpost/outpost.yaml`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		return withConfig(fs, args, config.Default(), "config `FILE` (defaults apply when omitted)", func(cfg config.Config, log *zap.Logger) error {
			return runCentral(ctx, cfg, log)
		})
	},
}

func runCentral(ctx context.Context, cfg config.Config, log *zap.Logger) error {
	metrics := workers.NewCentralMetrics()
	defer metrics.Close()
	tc, err := temporalclient.Dial(cfg.Temporal, log, metrics.SDK)
	if err != nil {
		return err
	}
	defer tc.Close()
	if err := workers.EnsureSearchAttributes(ctx, tc, cfg.Temporal.Namespace, log); err != nil {
		return err
	}
	central, err := workers.NewCentral(ctx, cfg.Central, cfg.Temporal.Namespace, tc, metrics.Registry)
	if err != nil {
		return err
	}
	log.Info("central worker running", zap.String("temporal", cfg.Temporal.Address),
		zap.String("namespace", cfg.Temporal.Namespace), zap.String("store", cfg.Central.Store.Driver))
	return central.Run(ctx)
}
