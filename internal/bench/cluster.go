package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/cluster"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/smtpsink"
)

// The load the capacity table in docs/deploying.md is drawn for: each site
// sends this many notifications and makes this many cached calls a minute.
// The calls set the size of a site's telemetry batch (siteBatch).
const (
	capacityNotificationsPerMinute = 10
	capacityCallsPerMinute         = 100
)

// clusterWorkers is how many central worker processes the section runs,
// one on each node's frontend.
const clusterWorkers = cluster.Nodes

// clusterStoreDB is the central store's database on the cluster's
// PostgreSQL.
const clusterStoreDB = "outpost"

// onCluster runs on a self-hosted Temporal cluster (internal/cluster: two
// server processes on PostgreSQL, mutual TLS, production defaults) with the
// central store on the same PostgreSQL (driver postgres) and two central
// worker processes (`outpost central`, this binary re-executed), worker i
// on node i's frontend; the site, the bare worker and the benchmark's
// client are in this process, on node 0. It times:
//
//   - EndToEnd notifications through the site to the SMTP sink against as
//     many BareWorkflow runs (one activity sending the same email) on the
//     same cluster, in alternating rounds (as the e2e section).
//   - TelemetryRows tracking changes from telemetrySites sites, every site
//     one batch at a time and all at once, ingested by the two workers,
//     against the store's bulk upsert of as many rows in the same batches
//     from one writer; and, alternating with both, a tenth as many changes
//     in the batches a site of the capacity load sends (siteBatch).
//
// Over each side it reads the CPU of the workers, the server processes,
// PostgreSQL (the postmaster and every backend, processTreeCPU) and this
// process from /proc: per notification and per telemetry change, what the
// capacity table in docs/deploying.md is drawn from.
func (r *run) onCluster(ctx context.Context) (rows []Row, err error) {
	cb, err := r.startClusterBench(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, cb.stop()) }()
	e2e, err := cb.timeEndToEnd(ctx)
	if err != nil {
		return nil, err
	}
	tel, err := cb.timeTelemetry(ctx)
	if err != nil {
		return nil, err
	}
	return append(e2e, tel...), nil
}

// clusterBench is the cluster section's system under test.
type clusterBench struct {
	r       *run
	cluster *cluster.Cluster
	tc      client.Client
	store   *centralstore.Store
	box     *mailbox
	// e runs the site, the bare worker and the demo system.
	e       *endToEnd
	workers *centralWorkers
	stops   []func() error
}

func (r *run) startClusterBench(ctx context.Context) (cb *clusterBench, err error) {
	cb = &clusterBench{r: r}
	defer func() {
		if err != nil {
			err = errors.Join(err, cb.stop())
		}
	}()
	if err := cb.startCluster(ctx); err != nil {
		return nil, err
	}
	sink, err := smtpsink.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cb.stops = append(cb.stops, sink.Close)
	cb.box = newMailbox(sink)
	central, env, err := cb.centralConfig(ctx, sink.Port())
	if err != nil {
		return nil, err
	}
	if err := cb.startWorkers(ctx, central, env); err != nil {
		return nil, err
	}
	cb.e = &endToEnd{tc: cb.tc, body: r.body(), par: r.opts.Parallelism}
	cb.stops = append(cb.stops, func() error { return cb.e.stop() })
	if err := cb.e.startBare(central); err != nil {
		return nil, err
	}
	if err := cb.e.startDemoSystem(); err != nil {
		return nil, err
	}
	if err := cb.e.startSite(ctx, r.siteConfig(cb.e.demo.URL()), r); err != nil {
		return nil, err
	}
	return cb, nil
}

// startCluster starts the cluster in a temp folder of its own, as `outpost
// dev --cluster` does (run as root, PostgreSQL runs as the postgres user,
// which must reach its folder), its log in cluster-temporal.log.
func (cb *clusterBench) startCluster(ctx context.Context) error {
	cb.r.step("cluster: starting a Temporal cluster of %d server processes on PostgreSQL with mutual TLS (the first run on a machine builds the pinned server: a few minutes)", cluster.Nodes)
	dir, err := os.MkdirTemp("", "outpost-bench-cluster-")
	if err != nil {
		return fmt.Errorf("cluster folder: %w", err)
	}
	cb.stops = append(cb.stops, func() error { return os.RemoveAll(dir) })
	log, err := os.Create(cb.r.path("cluster-temporal.log"))
	if err != nil {
		return fmt.Errorf("create the cluster's log: %w", err)
	}
	cb.stops = append(cb.stops, log.Close)
	c, err := cluster.Start(ctx, cluster.Options{Dir: dir, Namespace: namespace, Log: log, Logger: cb.r.log.Named("cluster")})
	if err != nil {
		return err
	}
	cb.cluster = c
	cb.stops = append(cb.stops, func() error { c.Stop(); return nil })
	cb.r.step("cluster: started in %s, frontends %v", c.StartupTime.Round(time.Millisecond), c.Frontends())
	cb.tc, err = fromconfig.DialTemporal(c.Temporal(0, config.Default().Temporal), cb.r.log.Named("cluster"), nil, nil)
	if err != nil {
		return err
	}
	cb.stops = append(cb.stops, func() error { cb.tc.Close(); return nil })
	return nil
}

// centralConfig creates the central store's database on the cluster's
// PostgreSQL, opens it for the baseline, and returns the workers' config
// (the other sections' central config on driver postgres, its URL without
// the password) and the environment holding the password.
func (cb *clusterBench) centralConfig(ctx context.Context, smtpPort int) (config.Central, []string, error) {
	pg := cb.cluster.Postgres()
	if err := pg.CreateDatabase(ctx, clusterStoreDB); err != nil {
		return config.Central{}, nil, err
	}
	store, err := centralstore.OpenPostgres(ctx, pg.DSN(clusterStoreDB))
	if err != nil {
		return config.Central{}, nil, err
	}
	cb.store = store
	cb.stops = append(cb.stops, store.Close)
	c := cb.r.centralConfig(smtpPort)
	dsn, err := url.Parse(pg.DSN(clusterStoreDB))
	if err != nil {
		return config.Central{}, nil, fmt.Errorf("central store URL: %w", err)
	}
	dsn.User = url.User(pg.User)
	c.Store.Driver, c.Store.DSN = config.DriverPostgres, dsn.String()
	return c, []string{c.Store.PasswordEnv + "=" + pg.Password}, nil
}

// startWorkers starts the central worker processes one after the other
// (each registers the search attributes as it starts) and waits until
// Temporal lists them.
func (cb *clusterBench) startWorkers(ctx context.Context, central config.Central, env []string) error {
	cb.r.step("cluster: starting %d central workers (`outpost central`, each its own process, on the PostgreSQL store), worker i on node i's frontend", clusterWorkers)
	cb.workers = &centralWorkers{}
	cb.stops = append(cb.stops, func() error { return cb.workers.stop() })
	for i := range clusterWorkers {
		t := cb.cluster.Temporal(i%cluster.Nodes, config.Default().Temporal)
		p, err := cb.r.startCentralProcess(ctx, fmt.Sprintf("cluster-central-%d", i+1), t, central, env)
		if err != nil {
			return err
		}
		cb.workers.procs = append(cb.workers.procs, p)
	}
	return awaitCentralListed(ctx, cb.tc)
}

// stop stops everything started, last first.
func (cb *clusterBench) stop() error {
	var errs []error
	for i := len(cb.stops) - 1; i >= 0; i-- {
		errs = append(errs, cb.stops[i]())
	}
	cb.stops = nil
	return errors.Join(errs...)
}

// clusterCPU is the CPU each part used over one side's rounds.
type clusterCPU struct {
	workers, servers, postgres, self []*cpuOf
}

// newClusterCPU makes the meters of every part: each worker, each server
// process, PostgreSQL's process tree and this process.
func (cb *clusterBench) newClusterCPU() clusterCPU {
	var m clusterCPU
	for _, p := range cb.workers.procs {
		m.workers = append(m.workers, &cpuOf{pid: p.cmd.Process.Pid})
	}
	for _, pid := range cb.cluster.ServerPIDs() {
		m.servers = append(m.servers, &cpuOf{pid: pid})
	}
	m.postgres = []*cpuOf{{pid: cb.cluster.Postgres().PID(), tree: true}}
	m.self = []*cpuOf{{pid: os.Getpid()}}
	return m
}

func (m clusterCPU) all() []*cpuOf {
	return append(append(append(append([]*cpuOf{}, m.workers...), m.servers...), m.postgres...), m.self...)
}

// perItem is the CPU of meters (summed) spread over n items, in ms.
func perItem(meters []*cpuOf, n int) float64 {
	var sum time.Duration
	for _, m := range meters {
		sum += m.total
	}
	return perItemMS(sum, n)
}

// String is each part's CPU per item, for n items.
func (m clusterCPU) per(n int) string {
	return fmt.Sprintf("central workers %.2f ms, Temporal servers %.2f ms, PostgreSQL %.2f ms, this process %.2f ms",
		perItem(m.workers, n), perItem(m.servers, n), perItem(m.postgres, n), perItem(m.self, n))
}

// timeEndToEnd is the e2e section's comparison on the cluster: warm-up,
// then alternating rounds of notifications through the site and of
// BareWorkflow, with the CPU of every part over each side.
func (cb *clusterBench) timeEndToEnd(ctx context.Context) ([]Row, error) {
	n, p := cb.r.opts.EndToEnd, cb.r.opts.Parallelism
	warm := min(50, n/10+1)
	cb.r.step("cluster: warm-up, %d through the site and %d bare workflows, untimed", warm, warm)
	if _, err := cb.box.time(ctx, warm, cb.e.throughSite(warm)); err != nil {
		return nil, fmt.Errorf("cluster warm-up through the site: %w", err)
	}
	if _, err := cb.box.time(ctx, warm, cb.e.bare(warm, BareWorkflow)); err != nil {
		return nil, fmt.Errorf("cluster warm-up of the bare workflow: %w", err)
	}
	cb.r.step("cluster: %s notifications through site, forwarder, central workers and SMTP, and %s bare workflows, in %d alternating rounds each",
		thousands(int64(n)), thousands(int64(n)), e2eRounds)
	site, bare := cb.newClusterCPU(), cb.newClusterCPU()
	side := func(cpu clusterCPU, send func(k int) func(context.Context) error) func(round int) (time.Duration, error) {
		return func(round int) (time.Duration, error) {
			k := share(n, e2eRounds, round)
			return withCPU(cpu.all(), func() (time.Duration, error) { return cb.box.time(ctx, k, send(k)) })
		}
	}
	times, err := alternate(e2eRounds, side(site, cb.e.throughSite),
		side(bare, func(k int) func(context.Context) error { return cb.e.bare(k, BareWorkflow) }))
	if err != nil {
		return nil, err
	}
	siteTimes, bareTimes := times[0], times[1]
	rate := compare(SectionCluster, "cluster end to end, delivered (site to SMTP)", perSecond(n, siteTimes.total()), "/s",
		Figure{Name: fmt.Sprintf("bare workflow + 1 activity on the same cluster, %d in flight", p), Value: perSecond(n, bareTimes.total()), Unit: "/s"})
	rate = rate.atLeastRatio(0.9).withDetail("%s notifications in %.1f s (rounds %s) by %d central workers on the PostgreSQL store; "+
		"bare: %.1f s (rounds %s), its worker in this process; CPU a notification: %s; a bare workflow: %s; %s",
		thousands(int64(n)), siteTimes.total().Seconds(), siteTimes, clusterWorkers, bareTimes.total().Seconds(), bareTimes,
		site.per(n), bare.per(n), cb.box.duplicates())
	const perNote = "CPU-seconds over the notification rounds (process CPU clocks; PostgreSQL's process tree from /proc/<pid>/stat) a notification delivered"
	return []Row{
		rate,
		compare(SectionCluster, "cluster central workers' CPU a notification", perItem(site.workers, n), "ms",
			Figure{Name: "this process's a bare workflow (bare worker, client, SMTP sink)", Value: perItem(bare.self, n), Unit: "ms"}).
			withDetail("%s, both worker processes; this process's a notification (site, SMTP sink): %.2f ms", perNote, perItem(site.self, n)),
		compare(SectionCluster, "cluster Temporal servers' CPU a notification", perItem(site.servers, n), "ms",
			Figure{Name: "a bare workflow", Value: perItem(bare.servers, n), Unit: "ms"}).
			withDetail("%s, both server processes", perNote),
		compare(SectionCluster, "cluster PostgreSQL CPU a notification", perItem(site.postgres, n), "ms",
			Figure{Name: "a bare workflow", Value: perItem(bare.postgres, n), Unit: "ms"}).
			withDetail("%s, the postmaster and every backend (its process tree, exited backends through the postmaster's children's time); "+
				"the one PostgreSQL holds Temporal's two databases and the central store", perNote),
	}, nil
}

// siteBatch is the telemetry batch a site of the capacity load sends: its
// calls' two tracking changes each over one site.telemetry_delay, which a
// sender waits for while its backlog is under a full batch.
func siteBatch() int {
	delay := config.Default().Site.TelemetryDelay
	return int(math.Ceil(2 * capacityCallsPerMinute * delay.Minutes()))
}

// timeTelemetry times the ingest of full batches against bulk upserts of
// the same rows, and alternating with both, the ingest of site-sized
// batches (siteBatch), with the CPU of every part over each side.
func (cb *clusterBench) timeTelemetry(ctx context.Context) ([]Row, error) {
	// Every site sends one batch a round, all sites at once.
	size := max(1, min(config.Default().Site.TelemetryBatch, cb.r.opts.TelemetryRows/(telemetrySites*telemetryRounds)))
	n := size * telemetrySites * telemetryRounds
	small := siteBatch()
	nSmall := max(telemetrySites, n/10)
	ingested, upserted := telemetryBatches("ingested", n, size), telemetryBatches("upserted", n, size)
	smallBatches := telemetryBatches("small", nSmall, small)
	cb.r.step("cluster: %s tracking changes from %d sites in batches of %d through %d central workers and as bulk upserts, and %s in batches of %d, %d rounds each",
		thousands(int64(n)), telemetrySites, size, clusterWorkers, thousands(int64(nSmall)), small, telemetryRounds)
	full, raw, site := cb.newClusterCPU(), cb.newClusterCPU(), cb.newClusterCPU()
	senders := newSiteSenders(cb.tc)
	ingest := func(cpu clusterCPU, side string, batches []contract.TelemetryBatch) func(round int) (time.Duration, error) {
		return func(round int) (time.Duration, error) {
			return withCPU(cpu.all(), func() (time.Duration, error) {
				return ingestRound(ctx, senders, cb.store, side, roundOf(batches, round), telemetrySites)
			})
		}
	}
	times, err := alternate(telemetryRounds, ingest(full, "ingested", ingested),
		func(round int) (time.Duration, error) {
			return withCPU(raw.all(), func() (time.Duration, error) {
				return timeBatches(ctx, roundOf(upserted, round), 1, func(ctx context.Context, b contract.TelemetryBatch) error {
					_, err := cb.store.UpsertSiteCalls(ctx, b.Rows)
					return err
				})
			})
		},
		ingest(site, "small", smallBatches))
	if err != nil {
		return nil, err
	}
	for side, batches := range map[string][]contract.TelemetryBatch{"ingested": ingested, "small": smallBatches} {
		if err := requireMirrored(ctx, cb.store, side, batches); err != nil {
			return nil, err
		}
	}
	viaTemporal, bulk, smallTimes := times[0], times[1], times[2]
	rate := compare(SectionCluster, fmt.Sprintf("cluster telemetry ingest, %d sites, %d central workers", telemetrySites, clusterWorkers),
		perSecond(n, viaTemporal.total()), "/s",
		Figure{Name: "bulk upsert of the same rows into PostgreSQL, 1 writer", Value: perSecond(n, bulk.total()), Unit: "/s"})
	rate = rate.atLeastRatio(0.8).withDetail("%s changes in batches of %d, each round every one of %d sites sending one batch at once "+
		"(sitedaemon.IngestSender, one a site: a signal a batch to one of central's ingest workflows, timed until site_calls held every change): %.1f s (rounds %s); bulk upserts one batch at a time %.1f s (rounds %s); "+
		"CPU a change ingested: %s; a change bulk-upserted: %s",
		thousands(int64(n)), size, telemetrySites, viaTemporal.total().Seconds(), viaTemporal, bulk.total().Seconds(), bulk,
		full.per(n), raw.per(n))
	sized := fmt.Sprintf("batches of %d (a site's %d calls a minute over site.telemetry_delay)", small, capacityCallsPerMinute)
	perChange := fmt.Sprintf("CPU-seconds over the rounds (process CPU clocks; PostgreSQL's process tree from /proc/<pid>/stat) a change, %s changes in %s, %d sites at once, %.1f s (rounds %s); "+
		"all parts: %s", thousands(int64(nSmall)), sized, telemetrySites, smallTimes.total().Seconds(), smallTimes, site.per(nSmall))
	fullName := fmt.Sprintf("a change in batches of %d", size)
	return []Row{
		rate,
		compare(SectionCluster, "cluster central workers' CPU a telemetry change, "+sized, perItem(site.workers, nSmall), "ms",
			Figure{Name: fullName, Value: perItem(full.workers, n), Unit: "ms"}).withDetail("%s", perChange),
		compare(SectionCluster, "cluster Temporal servers' CPU a telemetry change, "+sized, perItem(site.servers, nSmall), "ms",
			Figure{Name: fullName, Value: perItem(full.servers, n), Unit: "ms"}).withDetail("%s", perChange),
		compare(SectionCluster, "cluster PostgreSQL CPU a telemetry change, "+sized, perItem(site.postgres, nSmall), "ms",
			Figure{Name: fullName, Value: perItem(full.postgres, n), Unit: "ms"}).withDetail("%s", perChange),
	}, nil
}
