package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/outbox"
	"github.com/outpost-dev/outpost/workers"
)

var kpiCommand = command{
	name:    "kpi",
	summary: "print the outbox KPIs from the central store",
	usage:   "[--config FILE] [--region R] [--window 1h] [--since TIME] [--json]",
	help: `Reads the central store named in the config and prints, globally and per
source site, for each kind (Notification, ExternalCall, DatabaseWrite):

  queue           items waiting for delivery (Pending + Retrying)
  stuck           queued items created more than central.stuck_age ago
  parked          items waiting for an operator's retry or discard
  delivered/WIN   items delivered within the last --window
  since TIME      with --since (the previous sample's time, UTC): items
                  delivered since then, so successive samples add up
  oldest pending  age of the oldest queued item (parked items excluded)

Sites with nothing queued, parked or delivered in the window are left out.
--json prints the same report as JSON (ages and durations in seconds).

Each region's central keeps its own store: --region R reads the store of a
config whose central.region is R, and refuses any other config, so a
region's numbers are never another's (docs/regions.md).

Example:
  outpost kpi --config /etc/outpost/outpost.yaml --window 24h
  outpost kpi --config /etc/outpost/outpost.yaml --since 2026-11-23T06:00
  outpost kpi --config /etc/outpost/outpost.yaml --json | jq '.global.total.parked'
  outpost kpi --config /etc/outpost/central-eu.yaml --region eu`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		asJSON := fs.Bool("json", false, "print JSON instead of a table")
		window := fs.Duration("window", time.Hour, "count deliveries within this `DURATION` before now")
		sinceFlag := fs.String("since", "", "also count deliveries since this `TIME` (UTC: 2026-01-31T14:05), the previous sample's")
		region := fs.String("region", "", "only this `REGION`'s KPIs: the config's central must serve it (central.region)")
		return withConfigOrDevStack(fs, args, "config `FILE` naming the central store (omitted: "+devConfigDoc+")", func(cfg config.Config, _ *zap.Logger) error {
			if *window <= 0 {
				return fmt.Errorf("%w: --window must be positive, got %s", ErrUsage, *window)
			}
			since, err := parseUTC("since", *sinceFlag)
			if err != nil {
				return err
			}
			if err := checkKPIRegion(*region, cfg.Central.Region); err != nil {
				return err
			}
			central, err := centralToRead(cfg, fs.Lookup("config").Value.String() != "")
			if err != nil {
				return err
			}
			q := centralstore.KPIQuery{Now: time.Now(), StuckAge: central.StuckAge, Window: *window, Since: since}
			return runKPI(ctx, env.Stdout, central, q, *asJSON)
		})
	},
}

// checkKPIRegion refuses --region R (want) for a config whose central
// serves another region (served): its store holds that region's rows.
func checkKPIRegion(want, served string) error {
	if want == "" {
		return nil
	}
	if err := contract.CheckRegionName(want); err != nil {
		return fmt.Errorf("%w: --%v", ErrUsage, err)
	}
	if want != served {
		return fmt.Errorf("%w: --region %s: this config's central serves %s (central.region), and its store holds that region's rows: give region %s's config with --config",
			ErrUsage, want, contract.RegionWords(served), want)
	}
	return nil
}

// centralToRead is the central config whose store the command reads: the
// one loadConfig found (the dev stack's beside it, without --config). A
// SQLite store that does not exist is an error: a reader must never create
// an empty store and report zeros from it.
func centralToRead(cfg config.Config, configGiven bool) (config.Central, error) {
	central := cfg.Central
	if central.Store.Driver == config.DriverSQLite && !exists(central.Store.Path) {
		hint := "check central.store.path in the file given with --config (it is read over the production defaults; " +
			"a file written for `outpost dev --config` is not: give the config the dev stack runs with, <dev.data_dir>/" + devConfigFile + ")"
		if !configGiven {
			hint = "pass --config with the central worker's file, or run beside `outpost dev` (which writes " +
				filepath.Join(config.DevDefault().Dev.DataDir, devConfigFile) + ")"
		}
		return config.Central{}, fmt.Errorf("no central store at %s: %s", central.Store.Path, hint)
	}
	return central, nil
}

// openCentralToRead opens the central store centralToRead names, for a
// command whose flags fs hold --config.
func openCentralToRead(ctx context.Context, cfg config.Config, fs *flag.FlagSet) (*centralstore.Store, config.Central, error) {
	central, err := centralToRead(cfg, fs.Lookup("config").Value.String() != "")
	if err != nil {
		return nil, central, err
	}
	opts, err := fromconfig.CentralStore(central.Store)
	if err != nil {
		return nil, central, err
	}
	store, err := workers.OpenCentralStore(ctx, opts)
	return store, central, err
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func runKPI(ctx context.Context, w io.Writer, cfg config.Central, q centralstore.KPIQuery, asJSON bool) error {
	opts, err := fromconfig.CentralStore(cfg.Store)
	if err != nil {
		return err
	}
	store, err := workers.OpenCentralStore(ctx, opts)
	if err != nil {
		return err
	}
	defer store.Close()
	report, err := store.KPIs(ctx, q)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(w, report)
	}
	return printKPIs(w, cfg.Region, report, q.StuckAge, q.Window)
}

// printKPIs writes report as one table: the global rows first, then each
// site's, every group ending with its total ("all").
func printKPIs(w io.Writer, region string, report centralstore.KPIReport, stuckAge, window time.Duration) error {
	title := "Outbox"
	if region != "" {
		title = "Region " + region + ": outbox"
	}
	fmt.Fprintf(w, "%s at %s (stuck: queued longer than %s; delivered: last %s)\n\n",
		title, report.At.Format(time.RFC3339), outbox.FormatAge(stuckAge), outbox.FormatAge(window))
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	sinceColumn := ""
	if report.Since != nil {
		sinceColumn = "since " + report.Since.Format("2006-01-02T15:04") + "\t"
	}
	fmt.Fprintf(tw, "site\tkind\tqueue\tstuck\tparked\tdelivered/%s\t%soldest pending\n", outbox.FormatAge(window), sinceColumn)
	for _, g := range append([]centralstore.KPIGroup{report.Global}, report.Sites...) {
		site := g.Site
		if site == "" {
			site = "(global)"
		}
		// A row of empty cells separates groups and keeps one column width.
		fmt.Fprint(tw, "\t\t\t\t\t\t\n")
		for _, k := range g.Kinds {
			kpiRow(tw, site, k.Kind, k.KPIs, report.Since != nil)
			site = ""
		}
		kpiRow(tw, "", "all", g.Total, report.Since != nil)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(table.String()) {
		fmt.Fprintln(w, strings.TrimRight(line, " \n"))
	}
	if len(report.Sites) == 0 {
		fmt.Fprintln(w, "\nNo site has anything queued, parked or delivered in the window.")
	}
	return nil
}

func kpiRow(w io.Writer, site, kind string, k centralstore.KPIs, withSince bool) {
	oldest := "-"
	if k.OldestPendingAt != nil {
		oldest = outbox.FormatAge(k.OldestPendingAge())
	}
	since := ""
	if withSince {
		since = fmt.Sprintf("%d\t", k.DeliveredSince)
	}
	fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%s%s\n", site, kind, k.Queue, k.Stuck, k.Parked, k.Delivered, since, oldest)
}
