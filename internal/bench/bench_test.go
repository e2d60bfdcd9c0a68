package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/bench"
	"github.com/outpost-dev/outpost/internal/cli"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// TestMain lets this test binary stand in for `outpost`: the drain and
// status sections run the site daemon as its own process by re-executing
// their own binary as `outpost site --config FILE`, the fleet section its
// central workers as `outpost central --config FILE`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "site" || os.Args[1] == "central") {
		os.Exit(runOutpost(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func runOutpost(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.Run(ctx, args, cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}); err != nil {
		fmt.Fprintln(os.Stderr, "outpost:", err)
		return 1
	}
	return 0
}

// quick is every section at sizes that run in about a minute: the figures
// mean nothing, the code paths are all exercised.
func quick(t *testing.T) bench.Options {
	opts := bench.Defaults()
	opts.Dir = t.TempDir()
	opts.Callers = []int{1, 4}
	opts.EnqueueDuration = 200 * time.Millisecond
	opts.Rate, opts.LatencyDuration = 500, time.Second
	opts.Handoff, opts.Parallelism, opts.EndToEnd = 40, 4, 20
	opts.Drain, opts.WAN, opts.Rows, opts.StatusRequests = 60, 40, 2000, 50
	opts.GrowthRows, opts.WeekBacklog = 4000, 2000
	opts.BrowseRows, opts.BrowseRequests = 3000, 20
	opts.TableRows, opts.TableRequests, opts.PurgeRows = 20000, 10, 2000
	opts.TelemetryRows, opts.AirgapEntries = 2000, 2000
	opts.FleetSites, opts.FleetNotifications, opts.FleetCalls = 4, 3, 5
	return opts
}

func TestQuickRun(t *testing.T) {
	testutil.SkipIfShort(t)
	opts := quick(t)
	report, err := bench.Run(context.Background(), opts)
	require.NoError(t, err)

	sections := map[string]int{}
	byMeasure := map[string]bench.Row{}
	for _, row := range report.Rows {
		sections[row.Section]++
		byMeasure[row.Measure] = row
		require.Positive(t, row.Value, "%s", row.Measure)
		require.NotNil(t, row.Baseline, "%s has no baseline", row.Measure)
		require.Positive(t, row.Baseline.Value, "%s: %s", row.Measure, row.Baseline.Name)
		require.InDelta(t, row.Value/row.Baseline.Value, row.Ratio, 1e-9, "%s", row.Measure)
	}
	for _, s := range bench.Sections {
		if slices.Contains(bench.OptIn, s) {
			require.Zero(t, sections[s], "opt-in section %s ran without --only", s)
			continue
		}
		require.Positive(t, sections[s], "section %s has no rows", s)
	}
	require.Equal(t, 2*len(opts.Callers), sections[bench.SectionEnqueue], "each caller count against both baselines")
	e2e := report.Rows[slices.IndexFunc(report.Rows, func(r bench.Row) bool { return r.Section == bench.SectionEndToEnd })]
	require.Regexp(t, `the dev server's CPU: \d+\.\d ms a notification, \d+\.\d ms a bare workflow; this process's: \d+\.\d ms and \d+\.\d ms`, e2e.Detail)
	require.NotContains(t, e2e.Detail, "CPU: 0.0 ms", "the server did work for each side")
	// The baseline started like a notification has a delivered
	// notification's history: as many events, as many actions.
	like := byMeasure["end to end, against the same Temporal work and start options"]
	require.Equal(t, fmt.Sprintf("bare + 1 local activity, started like a notification, %d in flight", opts.Parallelism), like.Baseline.Name)
	require.NotContains(t, like.Detail, "CPU 0.0 ms", "the server did work for the baseline")
	events := regexp.MustCompile(`history (\d+) events`)
	likeEvents := events.FindStringSubmatch(like.Detail)
	notifiedEvents := events.FindStringSubmatch(byMeasure["Temporal actions per delivered notification"].Detail)
	require.NotNil(t, likeEvents, like.Detail)
	require.NotNil(t, notifiedEvents)
	require.Equal(t, notifiedEvents[1], likeEvents[1], "the baseline's history has as many events as a delivered notification's")
	// The forwarder and the bare calls alternate, four rounds each.
	handoff := report.Rows[slices.IndexFunc(report.Rows, func(r bench.Row) bool { return r.Section == bench.SectionHandoff })]
	fourRounds := `\(rounds \d+\.\d, \d+\.\d, \d+\.\d, \d+\.\d s\)`
	require.Regexp(t, `notifications in \d+\.\d+ s `+fourRounds+`; bare: \d+\.\d+ s `+fourRounds, handoff.Detail)
	// The drain is judged against as many bare starts as its backlog, not
	// a shorter burst (quick's Handoff is below its Drain).
	drain := report.Rows[slices.IndexFunc(report.Rows, func(r bench.Row) bool { return r.Section == bench.SectionDrain })]
	require.Equal(t, fmt.Sprintf("bare SignalWithStart, %d in flight, %d", opts.Parallelism, opts.Drain), drain.Baseline.Name)

	var table bytes.Buffer
	require.NoError(t, report.WriteTable(&table))
	require.Contains(t, table.String(), "enqueue, 4 callers (SDK Notify)")
	require.Contains(t, table.String(), "Targets: ")

	var js bytes.Buffer
	require.NoError(t, report.WriteJSON(&js))
	var decoded bench.Report
	require.NoError(t, json.Unmarshal(js.Bytes(), &decoded))
	require.Len(t, decoded.Rows, len(report.Rows))

	entries, err := os.ReadDir(opts.Dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the run's directory is removed unless kept")
}

func TestTargetsAt64Callers(t *testing.T) {
	opts := quick(t)
	opts.Only, opts.Callers, opts.EnqueueDuration = []string{bench.SectionEnqueue}, []int{64}, 100*time.Millisecond
	report, err := bench.Run(context.Background(), opts)
	require.NoError(t, err)
	require.Len(t, report.Rows, 2)
	for _, row := range report.Rows {
		require.NotNil(t, row.Target, "%s against %s", row.Measure, row.Baseline.Name)
	}
	require.Equal(t, "≥ 0.9×", report.Rows[0].Target.Text)
	// The SDK and the raw inserts ran in four alternating rounds each.
	fourRates := `[0-9,]+/s, [0-9,]+/s, [0-9,]+/s and [0-9,]+/s`
	require.Regexp(t, `in 4 alternating rounds each, each on one file: SDK `+fourRates+`; raw `+fourRates+`$`, report.Rows[0].Detail)
	// The second target is 0.8 of the ceiling the raw baselines measured.
	raw, perTx := report.Rows[0].Baseline.Value, report.Rows[1].Baseline.Value
	require.Equal(t, fmt.Sprintf("≥ %s×", strconv.FormatFloat(math.Round(0.8*raw/perTx*10)/10, 'f', -1, 64)), report.Rows[1].Target.Text)
}

// TestFleet runs the fleet section at a tiny size: four sites, real central
// worker processes (this binary as `outpost central`), and checks every row
// is there with figures that can be true.
func TestFleet(t *testing.T) {
	testutil.SkipIfShort(t)
	opts := quick(t)
	opts.Only = []string{bench.SectionFleet}
	report, err := bench.Run(context.Background(), opts)
	require.NoError(t, err)

	// Each worker's CPU is read from its process CPU clock, to the
	// nanosecond: positive even for a worker Temporal handed little.
	byMeasure := map[string]bench.Row{}
	for _, row := range report.Rows {
		require.Equal(t, bench.SectionFleet, row.Section)
		require.Positive(t, row.Value, "%s", row.Measure)
		require.NotNil(t, row.Baseline, "%s has no baseline", row.Measure)
		require.Positive(t, row.Baseline.Value, "%s: %s", row.Measure, row.Baseline.Name)
		require.InDelta(t, row.Value/row.Baseline.Value, row.Ratio, 1e-9, "%s", row.Measure)
		require.NotEmpty(t, row.Detail, "%s", row.Measure)
		byMeasure[row.Measure] = row
	}
	require.Len(t, byMeasure, 8, "delivery ratio, 3 worker CPU rows, 3 worker RSS rows, telemetry ingest")

	rate := byMeasure["fleet delivered, 2 central workers, 4 sites"]
	require.Equal(t, "/s", rate.Unit)
	require.Equal(t, "1 central worker, same sites", rate.Baseline.Name)
	require.NotNil(t, rate.Target)
	require.Equal(t, "≥ 1.5×", rate.Target.Text)
	if rate.Target.Unjudged != "" {
		require.False(t, rate.Target.Pass, "an unjudged target passes nothing")
		require.Contains(t, rate.Target.Unjudged, "dev server")
	} else {
		require.Equal(t, rate.Ratio >= 1.5, rate.Target.Pass)
	}
	require.Contains(t, rate.Detail, "12 notifications (3 from each site at once)")
	require.Contains(t, rate.Detail, "no email sent twice")

	for _, m := range []string{"fleet central worker CPU, 1 worker", "fleet central worker 1 of 2 CPU", "fleet central worker 2 of 2 CPU"} {
		row, ok := byMeasure[m]
		require.True(t, ok, "no row %q", m)
		require.Equal(t, "cores", row.Unit)
		require.Equal(t, "dev server CPU, same run", row.Baseline.Name)
		// Cores busy cannot exceed the machine's (a tick of slack each).
		require.LessOrEqual(t, row.Value, float64(runtime.NumCPU())+0.1, m)
		require.LessOrEqual(t, row.Baseline.Value, float64(runtime.NumCPU())+0.1, m)
	}
	for _, m := range []string{"fleet central worker peak RSS, 1 worker", "fleet central worker 1 of 2 peak RSS", "fleet central worker 2 of 2 peak RSS"} {
		row, ok := byMeasure[m]
		require.True(t, ok, "no row %q", m)
		require.Equal(t, "MiB", row.Unit)
		require.GreaterOrEqual(t, row.Value, row.Baseline.Value, "%s: a peak is at least the RSS of any moment", m)
		require.Less(t, row.Value, 4096.0, "%s: a central worker of 4 sites in GiB", m)
	}

	ingest := byMeasure["fleet telemetry ingest, 4 sites"]
	require.Equal(t, "bulk upsert of the same rows, 1 writer", ingest.Baseline.Name)
	require.Equal(t, "≥ 0.5×", ingest.Target.Text)
	require.Equal(t, ingest.Ratio >= 0.5, ingest.Target.Pass)
	require.Contains(t, ingest.Detail, "40 changes (5 cached calls a site, two changes each) in 4 batches")

	var table bytes.Buffer
	require.NoError(t, report.WriteTable(&table))
	require.Contains(t, table.String(), "fleet delivered, 2 central workers, 4 sites")
	require.Contains(t, table.String(), " cores ")
}

// TestCluster runs the cluster section at a tiny size: a real cluster of
// two server processes on PostgreSQL, two central worker processes (this
// binary as `outpost central`) on the PostgreSQL store, and checks every
// row is there with a baseline and figures that can be true.
func TestCluster(t *testing.T) {
	testutil.SkipIfShort(t)
	opts := quick(t)
	opts.Only = []string{bench.SectionCluster}
	report, err := bench.Run(context.Background(), opts)
	require.NoError(t, err)

	byMeasure := map[string]bench.Row{}
	for _, row := range report.Rows {
		require.Equal(t, bench.SectionCluster, row.Section)
		require.Positive(t, row.Value, "%s", row.Measure)
		require.NotNil(t, row.Baseline, "%s has no baseline", row.Measure)
		require.Positive(t, row.Baseline.Value, "%s: %s", row.Measure, row.Baseline.Name)
		require.NotEmpty(t, row.Detail, "%s", row.Measure)
		byMeasure[row.Measure] = row
	}
	require.Len(t, byMeasure, 8)

	e2e := byMeasure["cluster end to end, delivered (site to SMTP)"]
	require.Equal(t, "≥ 0.9×", e2e.Target.Text)
	require.Equal(t, "bare workflow + 1 activity on the same cluster, 4 in flight", e2e.Baseline.Name)
	require.Contains(t, e2e.Detail, "no email sent twice")
	require.Contains(t, e2e.Detail, "by 2 central workers on the PostgreSQL store")

	ingest := byMeasure["cluster telemetry ingest, 200 sites, 2 central workers"]
	require.Equal(t, "≥ 0.8×", ingest.Target.Text)
	require.Equal(t, "bulk upsert of the same rows into PostgreSQL, 1 writer", ingest.Baseline.Name)
	require.Equal(t, ingest.Ratio >= 0.8, ingest.Target.Pass)

	for _, m := range []string{
		"cluster central workers' CPU a notification", "cluster Temporal servers' CPU a notification", "cluster PostgreSQL CPU a notification",
		"cluster central workers' CPU a telemetry change, batches of 7 (a site's 100 calls a minute over site.telemetry_delay)",
		"cluster Temporal servers' CPU a telemetry change, batches of 7 (a site's 100 calls a minute over site.telemetry_delay)",
		"cluster PostgreSQL CPU a telemetry change, batches of 7 (a site's 100 calls a minute over site.telemetry_delay)",
	} {
		row, ok := byMeasure[m]
		require.True(t, ok, "no row %q", m)
		require.Equal(t, "ms", row.Unit, m)
		// Each part's CPU per item: in the rate row's detail for
		// notifications, in the row's own for telemetry changes.
		detail := row.Detail
		if strings.Contains(m, "notification") {
			detail = e2e.Detail
		}
		require.Regexp(t, `central workers \d+\.\d\d ms, Temporal servers \d+\.\d\d ms, PostgreSQL \d+\.\d\d ms`, detail, m)
	}
}

// TestGrowth runs the growth section at a tiny size and checks its two
// rows, their targets, and that the big store held what the rows say.
func TestGrowth(t *testing.T) {
	testutil.SkipIfShort(t)
	opts := quick(t)
	opts.Only, opts.GrowthRows, opts.Keep = []string{bench.SectionGrowth}, 20000, true
	report, err := bench.Run(context.Background(), opts)
	require.NoError(t, err)
	require.Len(t, report.Rows, 2)

	enqueue, status := report.Rows[0], report.Rows[1]
	require.Equal(t, "enqueue, 64 callers (SDK Notify), 20,000-row store", enqueue.Measure)
	require.Equal(t, "the same on an empty store", enqueue.Baseline.Name)
	require.Equal(t, "≥ 0.8×", enqueue.Target.Text)
	require.Equal(t, enqueue.Ratio >= 0.8, enqueue.Target.Pass)
	require.Equal(t, "Status p99, 20,000-row store", status.Measure)
	require.Equal(t, "Status p99, store of 1,000 calls", status.Baseline.Name)
	require.Equal(t, "≤ 1.25×", status.Target.Text)
	require.Equal(t, status.Ratio <= 1.25, status.Target.Pass)
	for _, row := range report.Rows {
		require.Positive(t, row.Value, row.Measure)
		require.Positive(t, row.Baseline.Value, row.Measure)
		require.InDelta(t, row.Value/row.Baseline.Value, row.Ratio, 1e-9, row.Measure)
		require.Regexp(t, `prefilled 20,000 rows in \d+\.\d s \([0-9,]+ rows/s\); the store held [0-9,]+ buffer rows and 10,000 tracking rows at the end`, row.Detail)
	}
	require.Contains(t, status.Detail, "50 random prefilled ids on each store's daemon process")

	// The kept store holds the prefilled rows and what the enqueue added.
	db, err := sqlitedb.Open(context.Background(), filepath.Join(report.Dir, "growth-site.db"))
	require.NoError(t, err)
	defer db.Close()
	var buffered, tracked, notified int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM buffer`).Scan(&buffered))
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM tracking`).Scan(&tracked))
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM job_log`).Scan(&notified))
	require.Equal(t, 10000, tracked)
	require.Positive(t, notified, "the enqueue wrote to the big store")
	require.Equal(t, 20000+notified, buffered)
	require.Contains(t, enqueue.Detail, fmt.Sprintf("the store held %s buffer rows", thousandsOf(buffered)))
}

// TestDrainWeek runs the drain-week section at a tiny size: the daemon
// process drains a backlog it was started on while central was
// unreachable, scripts enqueue on its store before, during and after, and
// every row is there with its target and figures that can be true.
func TestDrainWeek(t *testing.T) {
	testutil.SkipIfShort(t)
	opts := quick(t)
	opts.Only = []string{bench.SectionDrainWeek}
	report, err := bench.Run(context.Background(), opts)
	require.NoError(t, err)
	require.Len(t, report.Rows, 3)
	for _, row := range report.Rows {
		require.Equal(t, bench.SectionDrainWeek, row.Section)
		require.Positive(t, row.Value, row.Measure)
		require.Positive(t, row.Baseline.Value, row.Measure)
		require.InDelta(t, row.Value/row.Baseline.Value, row.Ratio, 1e-9, row.Measure)
		require.NotNil(t, row.Target, row.Measure)
	}

	rate, peak, enqueue := report.Rows[0], report.Rows[1], report.Rows[2]
	require.Equal(t, "drain 2,000 backlog: rate over its last 10%", rate.Measure)
	require.Equal(t, "rate over its first 10%, same drain", rate.Baseline.Name)
	require.Equal(t, "≥ 0.8×", rate.Target.Text)
	if rate.Target.Unjudged != "" {
		require.False(t, rate.Target.Pass, "an unjudged target passes nothing")
		require.Regexp(t, `^the dev server slowed as it filled: bare SignalWithStart ran at 0\.\d\d× its fresh rate after the drain$`, rate.Target.Unjudged)
	} else {
		require.Equal(t, rate.Ratio >= 0.8, rate.Target.Pass)
	}
	require.Regexp(t, `; the dev server alone: 40 calls in \d+\.\d\d s \(\d+\.\d\d s before, \d+\.\d\d s after\)$`, rate.Detail)
	// The backlog and the scripts' 4 enqueues of 64 (before, three during,
	// after: the last one is not drained) went through the daemon.
	m := regexp.MustCompile(`^first: ([0-9,]+) notifications in \d+\.\d s, last: ([0-9,]+) in \d+\.\d s; the daemon process drained 2,256 \(the backlog and the scripts' 256\), [0-9,]+ of them in`).FindStringSubmatch(rate.Detail)
	require.NotNil(t, m, rate.Detail)
	first, last := atoi(t, m[1]), atoi(t, m[2])
	require.GreaterOrEqual(t, first, 200, "the first window spans a tenth of the backlog")
	require.Positive(t, last)
	require.LessOrEqual(t, last, 200, "the last window is within the last tenth")

	require.Equal(t, "drain 2,000: site peak RSS", peak.Measure)
	require.Equal(t, "≤ 100 MiB", peak.Target.Text)
	require.Equal(t, peak.Value <= 100, peak.Target.Pass)

	require.Equal(t, "enqueue, 64 callers (SDK Notify), during the 2,000 drain", enqueue.Measure)
	require.Equal(t, "the same alone, same daemon, before and after", enqueue.Baseline.Name)
	require.Equal(t, "≥ 0.8×", enqueue.Target.Text)
	require.Equal(t, enqueue.Ratio >= 0.8, enqueue.Target.Pass)
	require.Regexp(t, `^64 notifications each time, on the daemon's store file; during, at three depths: [0-9,]+/s, [0-9,]+/s and [0-9,]+/s; alone \(central unreachable\): before the drain [0-9,]+/s, after it [0-9,]+/s; meanwhile, during: the daemon \d+\.\d\d cores, the dev server \d+\.\d\d; alone: the daemon \d+\.\d\d cores, the dev server \d+\.\d\d \(of the machine's \d+\)$`, enqueue.Detail)
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
	require.NoError(t, err)
	return n
}

// thousandsOf renders n as the report does: 41230 → "41,230".
func thousandsOf(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func TestOptionsRejectUnknownSection(t *testing.T) {
	opts := bench.Defaults()
	opts.Only = []string{"enqueue", "warp"}
	require.ErrorContains(t, opts.Validate(), `unknown section "warp"`)
}

func TestOptionsRejectUnknownEndToEndSide(t *testing.T) {
	opts := bench.Defaults()
	opts.EndToEndAlone = "bare-locale"
	require.ErrorContains(t, opts.Validate(), `e2e-alone: unknown side "bare-locale" (sides: notifications, bare, bare-local, bare-local-like-notification)`)
}

// --e2e-alone runs one side by itself, on a dev server of its own: its
// rate and what it cost the dev server and this process, every email
// delivered once.
func TestEndToEndSideAlone(t *testing.T) {
	testutil.SkipIfShort(t)
	for _, side := range []string{"notifications", "bare-local"} {
		t.Run(side, func(t *testing.T) {
			opts := quick(t)
			opts.Only, opts.EndToEndAlone = []string{bench.SectionEndToEnd}, side
			report, err := bench.Run(context.Background(), opts)
			require.NoError(t, err)
			require.Len(t, report.Rows, 1, "only the side alone")
			row := report.Rows[0]
			require.Equal(t, "end to end, "+side+" alone", row.Measure)
			require.Positive(t, row.Value)
			require.Nil(t, row.Target, "a side alone has nothing to be judged against")
			require.Regexp(t, `^20 in \d+\.\d s, 4 in flight; the dev server's CPU \d+\.\d\d ms an item, this process's \d+\.\d\d ms; no email sent twice$`, row.Detail)
			require.NotContains(t, row.Detail, "CPU 0.00 ms", "the server did work for the side")
		})
	}
}

// TestMarkdownIsTheLatestRunSection runs a tiny bench through the CLI with
// --markdown and checks that what it prints is the "Latest full run"
// section docs/performance.md takes: a heading, the date, the machine, the
// build, the command and the table in a code block.
func TestMarkdownIsTheLatestRunSection(t *testing.T) {
	var out, progress bytes.Buffer
	args := []string{"bench", "--only", "enqueue", "--callers", "1", "--enqueue-duration", "200ms", "--dir", t.TempDir(), "--markdown"}
	require.NoError(t, cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: &progress}), "stderr: %s", progress.String())

	md := out.String()
	require.True(t, strings.HasPrefix(md, "## Latest full run\n\n"), "starts with the section's heading:\n%s", md)
	require.Regexp(t, `(?m)^- Date: \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC$`, md)
	require.Regexp(t, `(?m)^- Machine: \S+, `+runtime.GOOS+`, `+strconv.Itoa(runtime.NumCPU())+` CPUs`, md)
	require.Regexp(t, `(?m)^- Build: outpost .*`+runtime.Version(), md)
	require.Contains(t, md, "\n- Command: `outpost bench --only enqueue --callers 1 --enqueue-duration 200ms --dir ")
	require.Contains(t, md, "outpost bench --markdown", "says how to make it again")

	start := strings.Index(md, "\n```\n")
	require.Positive(t, start, "a code block")
	block, rest, closed := strings.Cut(md[start+len("\n```\n"):], "```\n")
	require.True(t, closed, "the code block is closed:\n%s", md)
	require.Empty(t, rest, "nothing after the code block")
	require.True(t, strings.HasPrefix(block, "outpost bench, "), "the block is the table's output:\n%s", block)
	require.Contains(t, block, "enqueue, 1 caller (SDK Notify)")
	require.Contains(t, block, "The run took ")
}

// TestWAN runs the wan section at a tiny size: the drain through the long
// link beside the same drain on loopback, with the rate at each round
// trip in the details.
func TestWAN(t *testing.T) {
	testutil.SkipIfShort(t)
	opts := quick(t)
	opts.Only = []string{bench.SectionWAN}
	report, err := bench.Run(context.Background(), opts)
	require.NoError(t, err)
	require.Len(t, report.Rows, 1)
	row := report.Rows[0]
	require.Equal(t, "drain 40 through a 300ms round trip", row.Measure)
	require.Equal(t, "the same drain on loopback", row.Baseline.Name)
	require.Positive(t, row.Value)
	require.Positive(t, row.Baseline.Value)
	require.Equal(t, "≥ 0.5×", row.Target.Text)
	require.Equal(t, row.Ratio >= 0.5, row.Target.Pass)
	require.Regexp(t, `^drain rate at a round trip of 30ms: \d+/s, 300ms: \d+/s, 600ms: \d+/s; 40 notifications each`, row.Detail)
	require.Regexp(t, `loopback: half before \(\d+/s\), half after \(\d+/s\)$`, row.Detail)
}
