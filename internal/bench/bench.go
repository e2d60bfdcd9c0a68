// Package bench is `outpost bench`: it measures the site's durable enqueue,
// the hand-off to Temporal, end-to-end delivery, the drain of a backlog,
// Tracking.Status on a big store, and central's lists, KPIs and purge on
// big tables, each beside a baseline measured in the
// same run on the same machine and file system, and checks the figures
// against the site path's performance targets (see docs/performance.md).
// Only ratios and figures from one run mean anything: the baselines
// carry the machine's noise too.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Sections, in the order Run runs them.
const (
	// SectionEnqueue is durable enqueue throughput per caller count.
	SectionEnqueue = "enqueue"
	// SectionLatency is enqueue latency at a fixed offered load.
	SectionLatency = "latency"
	// SectionHandoff is the forwarder's hand-off rate to a dev server.
	SectionHandoff = "handoff"
	// SectionEndToEnd is notifications delivered per second, site to SMTP.
	SectionEndToEnd = "e2e"
	// SectionDrain is a site daemon draining a backlog.
	SectionDrain = "drain"
	// SectionDrainWeek is a site daemon draining a week-long outage's
	// backlog while scripts enqueue; opt-in (see OptIn).
	SectionDrainWeek = "drain-week"
	// SectionWAN is the forwarder draining a backlog over a long link.
	SectionWAN = "wan"
	// SectionStatus is Tracking.Status and the daemon's RSS on a big store.
	SectionStatus = "status"
	// SectionGrowth is enqueue and Status on a site store of ten million
	// rows against the same on an empty one.
	SectionGrowth = "growth"
	// SectionBrowse is the list of every notification on a big central store.
	SectionBrowse = "browse"
	// SectionTables is central's reads and purge on tables of a year.
	SectionTables = "tables"
	// SectionTelemetry is tracking changes ingested into central's site_calls.
	SectionTelemetry = "telemetry"
	// SectionAirgap is exporting and verifying an air-gap bundle.
	SectionAirgap = "airgap"
	// SectionFleet is many sites against one and two central workers.
	SectionFleet = "fleet"
	// SectionReplication is enqueue on a site pair's active node.
	SectionReplication = "replication"
	// SectionCluster is delivery and telemetry ingest on a self-hosted
	// Temporal cluster on PostgreSQL, and each part's CPU.
	SectionCluster = "cluster"
)

// Sections lists every section in run order.
var Sections = []string{SectionEnqueue, SectionLatency, SectionHandoff, SectionEndToEnd, SectionDrain, SectionDrainWeek, SectionWAN, SectionStatus, SectionGrowth, SectionBrowse, SectionTables, SectionTelemetry, SectionAirgap, SectionFleet, SectionReplication, SectionCluster}

// OptIn lists the sections a run without Only leaves out, each too long
// for the bench everyone runs: drain-week drains a million notifications
// at the pace of a dev server with its state on disk, hours on 2 cores.
var OptIn = []string{SectionDrainWeek}

// Options says what to run and how big. Defaults are the full sizes.
type Options struct {
	// Dir is where the run makes its temporary directory (site stores, the
	// dev servers' state, logs): every file of the run, baselines
	// included, lives on this one file system. Default os.TempDir().
	Dir string `json:"dir,omitempty"`
	// Keep leaves the temporary directory in place. It is always kept when
	// the run fails. Default false.
	Keep bool `json:"keep"`
	// Only names the sections to run. Default: all (Sections) but OptIn.
	Only []string `json:"only,omitempty"`
	// Callers are the concurrent caller counts of the enqueue section.
	// Default 1, 8, 64 (the targets apply at 64).
	Callers []int `json:"callers"`
	// PayloadBytes is each notification's body size. Default 512.
	PayloadBytes int `json:"payloadBytes"`
	// EnqueueDuration is how long each enqueue throughput run lasts.
	// Default 5s.
	EnqueueDuration time.Duration `json:"-"`
	// Rate is the offered load of the latency section, enqueues per second.
	// Default 5000.
	Rate int `json:"rate"`
	// LatencyDuration is how long the latency section offers its load.
	// Default 10s.
	LatencyDuration time.Duration `json:"-"`
	// Handoff is how many notifications the hand-off section prefills and
	// forwards (and the bare loop starts). Default 5000.
	Handoff int `json:"handoff"`
	// Parallelism is how many hand-offs (and bare starts) run at once.
	// Default 8 (site.forward_parallelism's default).
	Parallelism int `json:"parallelism"`
	// EndToEnd is how many notifications the end-to-end and cluster
	// sections deliver (and bare workflows they run). Default 1000.
	EndToEnd int `json:"e2e"`
	// EndToEndAlone, when set, makes the e2e section run only this side
	// (one of EndToEndSides), EndToEnd items of it after the warm-up, and
	// report its rate and its CPU split alone: no other side's work lands
	// in its rounds. Default "": every side, in alternating rounds.
	EndToEndAlone string `json:"e2eAlone,omitempty"`
	// Drain is the backlog the site daemon drains. Default 50000.
	Drain int `json:"drain"`
	// WeekBacklog is the backlog the drain-week section's daemon drains.
	// Default 1000000.
	WeekBacklog int `json:"weekBacklog"`
	// WAN is the backlog the wan section drains at each round trip.
	// Default 5000.
	WAN int `json:"wan"`
	// Rows is how many buffered rows the status section's store holds: half
	// notifications, half cached calls, each call with its tracking row.
	// Default 1000000.
	Rows int `json:"rows"`
	// StatusRequests is how many GET /v1/operations/{id} the status section
	// times, and the growth section on each of its stores. Default 30000: a
	// p99 is the 1% slowest, and of 10,000 requests that is 100 of them,
	// which the machine's scheduling decides more than the store. Drawn again
	// from one run's 10,000 latencies a side (a bootstrap), the growth
	// row's ratio of two p99s spread from 0.97 to 1.30 (5th to 95th
	// percentile) around 1.13; from 30,000, from 1.04 to 1.24.
	StatusRequests int `json:"statusRequests"`
	// GrowthRows is how many buffered rows the growth section's big site
	// store holds, made like the status section's. Default 10000000.
	GrowthRows int `json:"growthRows"`
	// BrowseRows is how many notifications the browse section's central
	// store holds. Default 1000000.
	BrowseRows int `json:"browseRows"`
	// BrowseRequests is how many pages of each kind the browse section
	// times. Default 500.
	BrowseRequests int `json:"browseRequests"`
	// TableRows is how many notifications, and as many site_calls rows,
	// the tables section's central store holds. Default 10000000.
	TableRows int `json:"tableRows"`
	// TableRequests is how many requests of each kind the tables section
	// times. Default 200.
	TableRequests int `json:"tableRequests"`
	// PurgeRows is how many terminal rows the tables section purges (at
	// most TableRows). Default 1000000.
	PurgeRows int `json:"purgeRows"`
	// TelemetryRows is how many tracking changes the telemetry section
	// ingests (and upserts); the cluster section rounds it down to whole
	// batches of every site in every round. Default 100000.
	TelemetryRows int `json:"telemetryRows"`
	// AirgapEntries is how many entries the airgap section's bundle holds.
	// Default 100000.
	AirgapEntries int `json:"airgapEntries"`
	// FleetSites is how many simulated sites the fleet section runs.
	// Default 200.
	FleetSites int `json:"fleetSites"`
	// FleetNotifications is how many notifications each fleet site sends
	// in each of the fleet's two delivery runs. Default 3.
	FleetNotifications int `json:"fleetNotifications"`
	// FleetCalls is how many cached calls each fleet site makes (two
	// tracking changes each) for the fleet's telemetry run. Default 200.
	FleetCalls int `json:"fleetCalls"`
	// Progress receives a line per step; nil: none.
	Progress io.Writer `json:"-"`
}

// Defaults returns the full sizes.
func Defaults() Options {
	return Options{
		Callers: []int{1, 8, 64}, PayloadBytes: 512, EnqueueDuration: 5 * time.Second,
		Rate: 5000, LatencyDuration: 10 * time.Second, Handoff: 5000, Parallelism: 8,
		EndToEnd: 1000, Drain: 50000, WeekBacklog: 1000000, WAN: 5000, Rows: 1000000, StatusRequests: 30000, GrowthRows: 10000000, BrowseRows: 1000000, BrowseRequests: 500,
		TableRows: 10000000, TableRequests: 200, PurgeRows: 1000000, TelemetryRows: 100000, AirgapEntries: 100000,
		FleetSites: 200, FleetNotifications: 3, FleetCalls: 200,
	}
}

// Validate reports the first option that cannot run.
func (o Options) Validate() error {
	for _, s := range o.Only {
		if !slices.Contains(Sections, s) {
			return fmt.Errorf("unknown section %q (sections: %s)", s, strings.Join(Sections, ", "))
		}
	}
	for _, n := range o.Callers {
		if n < 1 {
			return fmt.Errorf("callers must be at least 1, got %d", n)
		}
	}
	switch {
	case len(o.Callers) == 0:
		return errors.New("callers: name at least one caller count")
	case o.PayloadBytes < 1:
		return fmt.Errorf("payload must be at least 1 byte, got %d", o.PayloadBytes)
	case o.EnqueueDuration <= 0 || o.LatencyDuration <= 0:
		return errors.New("durations must be positive")
	case o.Rate < 1 || o.Parallelism < 1:
		return errors.New("rate and parallelism must be at least 1")
	case o.Handoff < 2 || o.EndToEnd < 2:
		return errors.New("handoff and e2e need at least 2 notifications (the bare loop runs in two halves)")
	case o.EndToEndAlone != "" && !slices.Contains(EndToEndSides, o.EndToEndAlone):
		return fmt.Errorf("e2e-alone: unknown side %q (sides: %s)", o.EndToEndAlone, strings.Join(EndToEndSides, ", "))
	case o.Drain < 1 || o.WAN < 2 || o.Rows < 2 || o.StatusRequests < 1:
		return errors.New("drain and status requests must be positive, wan and rows at least 2")
	case o.WeekBacklog < 1000:
		return fmt.Errorf("week backlog must be at least 1000 (its tenths are timed), got %d", o.WeekBacklog)
	case o.GrowthRows < 2*growthSmallCalls:
		return fmt.Errorf("growth rows must be at least %d (more calls than the small store's %d), got %d", 2*growthSmallCalls, growthSmallCalls, o.GrowthRows)
	case o.BrowseRows < 10 || o.BrowseRequests < 1:
		return errors.New("browse rows must be at least 10 and browse requests positive")
	case o.TableRows < 1000 || o.TableRequests < 1:
		return errors.New("table rows must be at least 1000 and table requests positive")
	case o.PurgeRows < 2 || o.PurgeRows > o.TableRows:
		return fmt.Errorf("purge rows must be between 2 and the table rows (%d), got %d", o.TableRows, o.PurgeRows)
	case o.TelemetryRows < telemetryRounds:
		return fmt.Errorf("telemetry rows must be at least %d (one per round), got %d", telemetryRounds, o.TelemetryRows)
	case o.AirgapEntries < 2:
		return fmt.Errorf("airgap entries must be at least 2 (the bundle holds two nodes' logs), got %d", o.AirgapEntries)
	case o.FleetSites < 1 || o.FleetNotifications < 1 || o.FleetCalls < 1:
		return fmt.Errorf("fleet sites, notifications and calls must be at least 1, got %d, %d and %d", o.FleetSites, o.FleetNotifications, o.FleetCalls)
	}
	return nil
}

func (o Options) runs(section string) bool {
	if len(o.Only) == 0 {
		return !slices.Contains(OptIn, section)
	}
	return slices.Contains(o.Only, section)
}

// run is one benchmark run: its options, its temporary directory, the log
// of the SDK and the in-process site parts (bench.log there).
type run struct {
	opts    Options
	dir     string
	log     *zap.Logger
	started time.Time
}

// sections maps each section to what runs it.
var sections = map[string]func(*run, context.Context) ([]Row, error){
	SectionEnqueue:     (*run).enqueue,
	SectionLatency:     (*run).latency,
	SectionHandoff:     (*run).handoff,
	SectionEndToEnd:    (*run).endToEnd,
	SectionDrain:       (*run).drain,
	SectionDrainWeek:   (*run).drainWeek,
	SectionWAN:         (*run).wan,
	SectionStatus:      (*run).status,
	SectionGrowth:      (*run).growth,
	SectionBrowse:      (*run).browse,
	SectionTables:      (*run).tables,
	SectionTelemetry:   (*run).telemetry,
	SectionAirgap:      (*run).airgap,
	SectionFleet:       (*run).fleet,
	SectionReplication: (*run).replication,
	SectionCluster:     (*run).onCluster,
}

// Run runs the selected sections in order. The report holds the rows of
// every section that finished, also when a later one failed; the error
// then names the section and the kept directory with the logs.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	r, err := newRun(opts)
	if err != nil {
		return nil, err
	}
	report := newReport(opts, r.dir)
	r.step("files and logs in %s (removed at the end unless --keep or a section fails)", r.dir)
	for _, name := range Sections {
		if !opts.runs(name) {
			continue
		}
		rows, err := sections[name](r, ctx)
		report.Rows = append(report.Rows, rows...)
		if err != nil {
			r.close(true)
			return report, fmt.Errorf("bench %s: %w (files and logs kept in %s)", name, err, r.dir)
		}
	}
	report.Took = time.Since(r.started).Round(time.Second).String()
	r.close(opts.Keep)
	return report, nil
}

func newRun(opts Options) (*run, error) {
	dir, err := os.MkdirTemp(opts.Dir, "outpost-bench-")
	if err != nil {
		return nil, fmt.Errorf("make the run's directory: %w", err)
	}
	log, err := fileLogger(filepath.Join(dir, "bench.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &run{opts: opts, dir: dir, log: log, started: time.Now()}, nil
}

// fileLogger logs at info to path: the SDK's and the forwarder's messages
// are for a post-mortem, not for the table on stdout.
func fileLogger(path string) (*zap.Logger, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(f), zap.InfoLevel)), nil
}

// close syncs the log and removes the directory unless keep.
func (r *run) close(keep bool) {
	_ = r.log.Sync()
	if !keep {
		os.RemoveAll(r.dir)
	}
}

// removeStore removes the SQLite file name of the run's directory, with its
// WAL and shared-memory files, once its section has measured it, unless
// the run keeps its files. The big stores (10 and 20 GB) must go before
// the next section: the kernel still held their pages and wrote their
// last gigabytes back while the sections after them ran, and in a full
// run the air-gap rows read 0.38x and 0.48x of SHA-256 (0.49-0.54x and
// 0.65-0.68x alone), the no-replication enqueue p99 26 ms (3 ms alone).
func (r *run) removeStore(name string) {
	if r.opts.Keep {
		return
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(r.path(name + suffix))
	}
}

// path is a file in the run's directory.
func (r *run) path(name string) string { return filepath.Join(r.dir, name) }

// step tells the progress writer what the run is doing now.
func (r *run) step(format string, args ...any) {
	if r.opts.Progress == nil {
		return
	}
	elapsed := time.Since(r.started).Truncate(time.Second)
	fmt.Fprintf(r.opts.Progress, "[%6s] %s\n", elapsed, fmt.Sprintf(format, args...))
}

// body is a notification body of PayloadBytes printable bytes.
func (r *run) body() string {
	const text = "Pump 3 tripped: discharge pressure below the low-low limit for 30 s. "
	return strings.Repeat(text, r.opts.PayloadBytes/len(text)+1)[:r.opts.PayloadBytes]
}
