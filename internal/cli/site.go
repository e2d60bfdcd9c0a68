package cli

import (
	"context"
	"flag"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/tracing"
)

var siteCommand = command{
	name:    "site",
	summary: "run a site daemon (buffer, tracking, forwarder, site worker, local HTTP API)",
	usage:   "--config FILE",
	help: `Runs the site daemon on the site store: the local HTTP API (site.listen);
the forwarder that hands buffered operations to central, retrying every
site.forward_interval while central is unreachable; the Temporal worker on
task queue outpost-site-<site.id> that retries cached calls to the site's
external systems and databases; telemetry of tracking changes to central's
site_calls; and the purge of terminal tracking rows after
site.tracking_retention. It starts and accepts work with central down.

One daemon acts for a site id at a time. A daemon that finds another one
with its site.id polling outpost-site-<site.id> waits: the API answers new
work with 503 naming the holder, /readyz says "waiting: site held by …",
outpost_site_active is 0, and it still hands off and retries what its own
store holds. Two started at once: the later start yields. It takes the site
over once the holder's poller has been idle for site.holder_grace (2m).

With site.peer set, the daemon is one node of an active/standby pair: the
active node does the site's work and streams every store change to the
standby (site.replication: async, or sync to answer each enqueue once the
standby has it); the standby takes over when the active node is silent for
site.failover_after (5s), and a returning node hands over what it accepted
before it follows again. outpost site status shows both nodes.

The API takes JSON from scripts and tools only (web pages are refused). With
site.api_tokens set it asks for "Authorization: Bearer <token>", and each
operation's audit trail names the token's holder; a site.listen beyond
loopback requires one. Name one in production: without, any process on the
site host may write through the API, and the daemon logs a warning at
start. site.tls_cert_file and
site.tls_key_file serve it over HTTPS. temporal.encryption_keys encrypts
every payload it hands to central (the same keys as central's).
telemetry.otlp_endpoint sends a span of each API call (continuing the
caller's traceparent header) and of each hand-off to an OpenTelemetry
collector, in the trace that central's workflow and delivery attempts join.

Example:
  outpost site --config /etc/outpost/outpost.yaml
  curl -s -XPOST localhost:8480/v1/notifications -H 'Content-Type: application/json' \
    -d '{"list":"ops","subject":"Pump 3 tripped","body":"Pressure low"}'
  curl -s -XPOST localhost:8480/v1/calls -H 'Content-Type: application/json' \
    -d '{"system":"erp","method":"getOrder","params":{"id":"42"}}'
  curl -s localhost:8480/v1/operations/<id>`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		return withConfigOrDevStack(fs, args, "config `FILE` (omitted: "+devConfigDoc+")", func(cfg config.Config, log *zap.Logger) error {
			warnProductionRisks(log, cfg, productionRisksOf["site"]...)
			return runSite(ctx, cfg, log)
		})
	},
}

func runSite(ctx context.Context, cfg config.Config, log *zap.Logger) error {
	traces, err := tracing.Start(ctx, fromconfig.Tracing(cfg.Telemetry), tracing.ServiceSite)
	if err != nil {
		return err
	}
	defer stopTracing(traces, log)
	tc, err := fromconfig.LazyTemporal(cfg.Temporal, log, traces)
	if err != nil {
		return err
	}
	defer tc.Close()
	d, err := sitedaemon.StartDaemon(ctx, fromconfig.SiteDaemon(cfg.Site), tc, traces.TracerProvider(), log.Named("site"))
	if err != nil {
		return err
	}
	log.Info("site daemon running", zap.String("site", cfg.Site.ID), zap.String("api", "http://"+d.Addr()),
		zap.String("store", cfg.Site.Store))
	return d.Run(ctx)
}
