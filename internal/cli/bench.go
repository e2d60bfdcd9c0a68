package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/internal/bench"
)

var benchCommand = command{
	name:    "bench",
	summary: "measure the site write path and hand-off against baselines on this machine",
	usage:   "[--only SECTION,...] [--json | --markdown] [--dir DIR] [--keep] [size flags]",
	help: `Measures, on this machine, each figure beside a baseline run at the same
time on the same file system, and checks the targets (PASS/MISS):

  enqueue  durable enqueue throughput through the site SDK (Notify returns
           after commit) with --callers concurrent callers, 512-byte bodies,
           against raw SQLite inserts 100 per transaction from one writer
           (at 64 callers in 4 rounds alternating with the SDK's) and
           against one transaction per enqueue from the same callers.
           Targets at 64 callers: >= 0.9x raw batched; against one tx
           each, >= 0.8 of what raw batched inserts reach against it on
           this file system (the ceiling the row prints).
  latency  enqueue p50/p99 at --rate enqueues/s offered, open loop (each is
           due at a fixed time and timed from it), against a one-row commit
           unloaded. Target: p99 <= 10 ms.
  handoff  the forwarder handing a prefilled buffer to a Temporal dev server
           with no worker (so it signals each notification with its start),
           against bare SignalWithStart calls of the same workflow at the
           same parallelism, in alternating rounds. Target: >= 0.9x.
  e2e      notifications delivered per second, site SDK to the SMTP sink
           through the central worker, against a bare workflow with one
           activity sending the same mail (target >= 0.9x), against
           one with a local activity, the same Temporal work (target
           >= 0.95x), and against that started with a notification's
           start options and payloads (no target: Outpost's own work
           alone). Then the Temporal actions of one delivered
           notification's history (the site starts it with its input),
           against a bare workflow's (target: <= 2), and of one cached call
           delivered on its first retry, against that plus the retry
           interval's timer (target: <= 3). With --e2e-alone SIDE
           (notifications, bare, bare-local, bare-local-like-notification)
           only that side runs, --e2e items of it: its rate and its CPU
           split, the dev server's and this process's, with no other
           side's work in its time (no target).
  drain    a site daemon (its own process) draining a --drain backlog to a
           dev server, against as many bare SignalWithStart calls at the
           same parallelism (target >= 0.9x); its peak RSS against the
           idle daemon's.
  drain-week
           a week-long outage drained (not in a run without --only: hours
           and 20 GB at the default size on 2 cores, the dev server's state
           on disk): a site daemon process started on a --week-backlog
           backlog with its link to central cut, then a dev server behind
           the link. The drain's rate over the last
           10% of the backlog against its first 10% (target >= 0.8x), its
           peak RSS over the whole drain against an idle daemon's (target
           <= 100 MiB), and 64 scripts' SDK enqueue on its store at three
           depths during the drain against the same before (central
           unreachable) and after it (target >= 0.8x).
  wan      the forwarder draining a --wan backlog through a proxy that
           makes the link to the dev server a 300 ms round trip, against
           the same drain on loopback (rates at 30 and 600 ms in the
           details). Target: >= 0.5x.
  status   GET /v1/operations/{id} (Tracking.Status) on a daemon whose store
           holds --rows buffered rows with central unreachable: p50/p99
           against GET /healthz on the same daemon, and the daemon's RSS.
           Targets: p99 <= 1 ms, peak RSS (VmHWM) <= 100 MiB.
  growth   cost flat as the site store grows: on a store prefilled with
           --growth-rows buffered rows (made like the status section's;
           the fill's time in the details), enqueue through the SDK at 64
           callers against the same on an empty store (half before, half
           after), and Status p99 on a daemon process against a daemon on a
           store of 1,000 calls, alternating. Targets: enqueue >= 0.8x,
           Status p99 <= 1.25x. About 11 GB in --dir at the default size
           (removed when the section ends unless --keep).
  browse   the list of every notification (outbox page, 'outpost
           notifications list') on a central store of --browse-rows
           notifications: first, deep and filtered pages' p99 against a
           primary-key lookup. Target: <= 100 ms each.
  tables   central at fleet scale: a central store of --table-rows
           notifications and as many site_calls rows (a year from 200
           sites, mostly Delivered; prefill time in the details). p50/p99
           of the KPIs, a full /metrics scrape, the outbox's parked list and
           one site's, against a primary-key lookup; then the purge of
           --purge-rows terminal rows (rows/s, against the prefill's insert
           rate) and the KPIs' p99 while it runs, against their p99 idle.
           Targets: KPIs and /metrics <= 250 ms, parked lists <= 100 ms,
           purge >= 20,000 rows/s, KPIs during the purge <= 2x idle.
  telemetry
           --telemetry-rows tracking changes of 200 sites reaching
           central's site_calls as site daemons send them (a signal per
           batch of site.telemetry_batch rows to the site's ingest
           workflow shard, --parallelism in flight) against the store's
           bulk upsert of as many rows.
           Target: >= 0.9x.
  airgap   exporting and importing with verification an air-gap bundle of
           --airgap-entries entries (in memory), each against SHA-256 alone
           over the same bundle file. Targets: export >= 0.5x, verify
           >= 0.45x.
  fleet    --fleet-sites simulated sites in this process (each its own site
           store, SDK client, forwarder and telemetry sender) against one
           dev server and central workers run as their own processes
           (outpost central, sharing one central store). Notifications
           delivered per second, --fleet-notifications from every site at
           once, with two workers against one (target >= 1.5x, judged only
           when the dev server is not the bottleneck: under 0.8 of a core
           and the machine's cores under 90% busy in the two-worker run;
           else n/a, with the dev server's CPU beside the workers'); each
           worker's CPU (beside the dev server's) and peak RSS (beside its
           idle RSS; target <= 100 MiB for each of two workers); then --fleet-calls cached calls a site and every
           site's telemetry sender at once: changes ingested into site_calls
           per second against a bulk upsert of the same rows on the same
           store. Target: >= 0.5x. 3 to 5 minutes at the defaults.
  replication
           --rate enqueues/s for --latency-duration through the SDK client
           of a site pair's active node (both nodes in this process,
           central unreachable), with async and with sync replication,
           against one daemon alone (run first and last, the better
           counts). Targets: async throughput >= 0.9x; sync p99 <= 3x;
           replication lag p99 (commit on the active to commit on the
           standby) <= 100 ms. About 45 s.
  cluster  on a self-hosted Temporal cluster (two server processes on
           PostgreSQL, mutual TLS; needs Debian's postgresql package) with
           two central worker processes on the PostgreSQL central store:
           --e2e notifications site to SMTP against as many bare workflows
           + 1 activity on the same cluster (target >= 0.9x); --telemetry-rows
           changes from 200 sites at once ingested against bulk upserts of
           the same rows into PostgreSQL (target >= 0.8x); the CPU of the
           workers, the Temporal servers and PostgreSQL per notification
           and per telemetry change (docs/deploying.md's capacity table).

The Temporal sections start the pinned dev server (the first run builds it:
about three minutes); run from the checkout. A full run (every section but
drain-week) takes 29 to 41 minutes on 2 cores and 23 GB of disk in --dir (tables alone: 10 to 15
minutes and 20 GB); the temporary directory is
removed unless --keep, and kept with its logs when the run fails. Progress
goes to stderr, the table (or --json) to stdout. Ratios, not figures, are
what compare across machines; on a busy machine rerun before trusting one.
--markdown prints the table as the "Latest full run" section of
docs/performance.md (the date, the machine, the build, the command and the
table), which replaces that section whole; build the binary in the
checkout with go build -buildvcs=true so that it names its commit (go run
records none).

Example:
  go run ./cmd/outpost bench
  go run ./cmd/outpost bench --only enqueue,latency --callers 64
  go run ./cmd/outpost bench --only status --rows 100000 --json | jq '.rows[]'
  go run ./cmd/outpost bench --only growth --growth-rows 1000000
  go run ./cmd/outpost bench --only drain-week --week-backlog 100000
  go run ./cmd/outpost bench --only tables --table-rows 1000000 --purge-rows 300000
  go run ./cmd/outpost bench --only fleet --fleet-sites 50
  go run ./cmd/outpost bench --only cluster
  go build -buildvcs=true -o /tmp/outpost ./cmd/outpost && /tmp/outpost bench --markdown`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		opts := bench.Defaults()
		only := fs.String("only", "", "run only these comma-separated `SECTIONS` ("+strings.Join(bench.Sections, ", ")+"; without it, all but "+strings.Join(bench.OptIn, ", ")+")")
		callers := fs.String("callers", joinInts(opts.Callers), "comma-separated concurrent caller `COUNTS` of the enqueue section")
		asJSON := fs.Bool("json", false, "print JSON instead of a table")
		asMarkdown := fs.Bool("markdown", false, "print the table as docs/performance.md's \"Latest full run\" section")
		fs.StringVar(&opts.Dir, "dir", "", "make the run's temporary directory in `DIR` (default the system's temp dir)")
		fs.BoolVar(&opts.Keep, "keep", false, "keep the temporary directory (stores, logs)")
		fs.IntVar(&opts.PayloadBytes, "payload", opts.PayloadBytes, "notification body `BYTES`")
		fs.DurationVar(&opts.EnqueueDuration, "enqueue-duration", opts.EnqueueDuration, "length of each enqueue throughput run")
		fs.IntVar(&opts.Rate, "rate", opts.Rate, "offered load of the latency and replication sections, enqueues `PER_SECOND`")
		fs.DurationVar(&opts.LatencyDuration, "latency-duration", opts.LatencyDuration, "how long the latency and replication sections offer their load (each run of it)")
		fs.IntVar(&opts.Handoff, "handoff", opts.Handoff, "notifications the handoff section forwards (and the bare loop starts)")
		fs.IntVar(&opts.Parallelism, "parallelism", opts.Parallelism, "hand-offs (and bare starts) in flight at once")
		fs.IntVar(&opts.EndToEnd, "e2e", opts.EndToEnd, "notifications the e2e section delivers (and bare workflows it runs)")
		fs.StringVar(&opts.EndToEndAlone, "e2e-alone", "", "run only this `SIDE` of the e2e section (notifications, bare, bare-local, bare-local-like-notification): its rate and CPU split alone")
		fs.IntVar(&opts.Drain, "drain", opts.Drain, "backlog the drain section's daemon drains")
		fs.IntVar(&opts.WeekBacklog, "week-backlog", opts.WeekBacklog, "backlog the drain-week section's daemon drains")
		fs.IntVar(&opts.WAN, "wan", opts.WAN, "backlog the wan section drains at each round trip")
		fs.IntVar(&opts.Rows, "rows", opts.Rows, "buffered rows in the status section's store (half cached calls with tracking rows)")
		fs.IntVar(&opts.StatusRequests, "status-requests", opts.StatusRequests, "Status requests the status section times (and the growth section on each store)")
		fs.IntVar(&opts.GrowthRows, "growth-rows", opts.GrowthRows, "buffered rows in the growth section's big store (half cached calls with tracking rows)")
		fs.IntVar(&opts.BrowseRows, "browse-rows", opts.BrowseRows, "notifications in the browse section's central store")
		fs.IntVar(&opts.BrowseRequests, "browse-requests", opts.BrowseRequests, "pages of each kind the browse section times")
		fs.IntVar(&opts.TableRows, "table-rows", opts.TableRows, "notifications, and as many site_calls rows, in the tables section's central store")
		fs.IntVar(&opts.TableRequests, "table-requests", opts.TableRequests, "requests of each kind the tables section times")
		fs.IntVar(&opts.PurgeRows, "purge-rows", opts.PurgeRows, "terminal rows the tables section purges (at most --table-rows)")
		fs.IntVar(&opts.TelemetryRows, "telemetry-rows", opts.TelemetryRows, "tracking changes the telemetry section ingests")
		fs.IntVar(&opts.AirgapEntries, "airgap-entries", opts.AirgapEntries, "entries in the airgap section's bundle")
		fs.IntVar(&opts.FleetSites, "fleet-sites", opts.FleetSites, "simulated sites the fleet section runs in this process")
		fs.IntVar(&opts.FleetNotifications, "fleet-notifications", opts.FleetNotifications, "notifications each fleet site sends in each delivery run (one and two central workers)")
		fs.IntVar(&opts.FleetCalls, "fleet-calls", opts.FleetCalls, "cached calls each fleet site makes (two tracking changes each) for the telemetry ingest")
		cpuProfile := fs.String("cpuprofile", "", "write this process's CPU profile over the run to `FILE` (go tool pprof); "+
			"the central workers, site daemons and Temporal servers some sections start are processes of their own: OUTPOST_PPROF=1 serves a central worker's")
		if err := parse(fs, args); err != nil {
			return err
		}
		if *cpuProfile != "" {
			stop, err := startCPUProfile(*cpuProfile)
			if err != nil {
				return err
			}
			defer stop()
		}
		var err error
		if opts.Callers, err = parseInts(*callers); err != nil {
			return fmt.Errorf("%w: --callers: %v", ErrUsage, err)
		}
		if *only != "" {
			opts.Only = strings.Split(*only, ",")
		}
		if err := opts.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		if *asJSON && *asMarkdown {
			return fmt.Errorf("%w: --json and --markdown each choose the output: pass one", ErrUsage)
		}
		opts.Progress = env.Stderr
		write := (*bench.Report).WriteTable
		switch {
		case *asJSON:
			write = (*bench.Report).WriteJSON
		case *asMarkdown:
			write = (*bench.Report).WriteMarkdown
		}
		return runBench(ctx, env, opts, "outpost bench "+strings.Join(args, " "), write)
	},
}

// runBench prints the report with write, a partial one too when a section
// failed; the report names the build and the command line that made it.
func runBench(ctx context.Context, env Env, opts bench.Options, commandLine string, write func(*bench.Report, io.Writer) error) error {
	report, err := bench.Run(ctx, opts)
	if report != nil {
		report.Build, report.Command = Version(), commandLine
		if !strings.Contains(report.Build, "(commit ") {
			report.Build += " (no commit recorded: build it in the checkout with go build -buildvcs=true)"
		}
		if werr := write(report, env.Stdout); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// startCPUProfile writes this process's CPU profile to path until stop:
// profile before tuning.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
