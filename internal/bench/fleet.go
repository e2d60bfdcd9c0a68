package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/site/temporalcentral"
)

// The fleet section's rule for a dev server that is the bottleneck: in the
// two-worker run the dev server used at least devServerBound of one core,
// or the machine's cores were at least machineBound busy in all (then no
// process, a second worker least of all, can get more CPU). Either way a
// second central worker cannot show what it adds, and the ratio's target
// is not judged.
const (
	devServerBound = 0.8
	machineBound   = 0.9
)

// fleet runs FleetSites simulated sites in this process, each with its own
// site store, SDK client, forwarder and telemetry sender (wired as the
// site daemon wires them, config defaults), against one dev server, an
// SMTP sink and a demo external system in this process, and central
// workers as their own processes (`outpost central`, this binary
// re-executed) sharing one central store. It times:
//
//   - FleetNotifications notifications per site, every site at once, from
//     the first Notify until the sink has every email: once with one central
//     worker process, once with two (fresh processes each time). The
//     target (two ≥ 1.5× one) is judged only when the dev server is not the
//     bottleneck (devServerBound, machineBound).
//   - FleetCalls cached calls per site, delivered on their immediate
//     attempt (two tracking changes each), then every site's telemetry
//     sender started at once on that backlog, with the two workers, from
//     the first batch sent until central persisted every batch; against
//     the central store's bulk upsert of the same changes (renamed, so
//     they are new rows) in the same batches from one writer, half before
//     and half after.
//
// The CPU of every worker, the dev server, this process (the sites) and the
// machine is read from /proc over each timed run, and each worker's RSS.
func (r *run) fleet(ctx context.Context) (rows []Row, err error) {
	srv, err := r.startTemporal(ctx, SectionFleet)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, srv.stop()) }()
	serverPID, err := srv.pid()
	if err != nil {
		return nil, fmt.Errorf("find the dev server's process: %w", err)
	}
	sink, err := smtpsink.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	f := &fleet{r: r, tc: srv.client(), addr: srv.addr, serverPID: serverPID, box: newMailbox(sink), bg: &endToEnd{}}
	f.central = r.centralConfig(sink.Port())
	f.central.Store.Path = r.path("fleet-central.db")
	defer func() { err = joinStop(err, f.bg.stop()) }()
	if err := f.bg.startDemoSystem(); err != nil {
		return nil, err
	}
	if err := f.startSites(ctx); err != nil {
		return nil, err
	}
	one, err := f.deliver(ctx, 1, true)
	if err != nil {
		return nil, err
	}
	two, err := f.deliver(ctx, 2, false)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, two.workers.stop()) }()
	tel, err := f.telemetry(ctx, two.workers)
	if err != nil {
		return nil, err
	}
	peaks, err := two.workers.memory()
	if err != nil {
		return nil, err
	}
	return f.rows(one, two, tel, peaks), nil
}

// fleet is the fleet section under way.
type fleet struct {
	r         *run
	tc        client.Client
	addr      string
	serverPID int
	box       *mailbox
	central   config.Central
	// bg runs the sites' forwarders and telemetry senders and the demo
	// system, and stops them.
	bg    *endToEnd
	sites []*fleetSite
	// batch is the sites' telemetry batch (site.telemetry_batch).
	batch int
}

// fleetSite is one simulated site.
type fleetSite struct {
	id        string
	store     *sitestore.Store
	client    *site.Client
	telemetry *sitedaemon.Telemetry
}

// startSites opens FleetSites site stores in the run's directory, each with
// its client, forwarder (running from now on) and telemetry sender (started
// by the telemetry run).
func (f *fleet) startSites(ctx context.Context) error {
	n := f.r.opts.FleetSites
	f.r.step("fleet: %s site stores, each with its SDK client, forwarder and telemetry sender", thousands(int64(n)))
	dir := f.r.path("fleet-sites")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	for i := range n {
		id := fmt.Sprintf("fleet-%03d", i)
		s, err := f.startSite(ctx, id, filepath.Join(dir, id+".db"))
		if err != nil {
			return fmt.Errorf("fleet: site %s: %w", id, err)
		}
		f.sites = append(f.sites, s)
	}
	return nil
}

// startSite wires one site as the daemon wires it (sitedaemon.StartDaemon)
// from the config defaults, the run's parallelism and the demo system as
// the external system of its cached calls; its forwarder runs from now on.
// The daemon's API, site worker, local retries and purge are left out: the
// fleet measures what reaches central.
func (f *fleet) startSite(ctx context.Context, id, path string) (*fleetSite, error) {
	cfg := f.r.siteConfig(f.bg.demo.URL())
	cfg.ID, cfg.Store = id, path
	opts := fromconfig.SiteDaemon(cfg)
	store, err := sitestore.Open(ctx, path, sitestore.Options{CommitBatch: opts.CommitBatch, CommitDelay: opts.CommitDelay})
	if err != nil {
		return nil, err
	}
	log := f.r.log.Named("fleet").With(zap.String("site", id))
	reg := targets.New(opts.ExternalSystems, opts.Databases)
	fwd := sitedaemon.NewForwarder(store, reg, f.tc, sitedaemon.ForwarderOptions{
		Interval: opts.ForwardInterval, Batch: opts.ForwardBatch, Parallelism: opts.ForwardParallelism, MaxInFlight: opts.ForwardMaxInFlight, PollInterval: opts.PollInterval,
	}, log.Named("forwarder"))
	s := &fleetSite{
		id: id, store: store,
		client: site.New(store, reg, targetexec.New(reg), site.Options{
			SiteID: id, Node: benchNode, Script: benchScript, Central: temporalcentral.New(f.tc), MaxBodyBytes: opts.MaxBodyBytes, OnEnqueue: fwd.Wake,
		}),
		telemetry: sitedaemon.NewTelemetry(store, f.tc, sitedaemon.TelemetryOptions{
			SiteID: id, Batch: opts.TelemetryBatch, Delay: opts.TelemetryDelay,
		}, log.Named("telemetry")),
	}
	f.batch = opts.TelemetryBatch
	// Stopped last first: the forwarder, then the client and its store.
	f.bg.stops = append(f.bg.stops, s.client.Close)
	f.bg.run(ctx, fwd.Run, nil)
	return s, nil
}

// centralWorkers are central worker processes and their RSS once idle.
type centralWorkers struct {
	procs []*childProcess
	idle  []memory
}

// startWorkers starts n central worker processes on the fleet's central
// store and reads their RSS idleFor after the last one answered.
func (f *fleet) startWorkers(ctx context.Context, n int) (*centralWorkers, error) {
	f.r.step("fleet: starting %s (`outpost central`, each its own process)", plural(n, "central worker"))
	w := &centralWorkers{}
	for i := range n {
		p, err := f.startWorker(ctx, fmt.Sprintf("fleet-central-%dof%d", i+1, n))
		if err != nil {
			return nil, errors.Join(err, w.stop())
		}
		w.procs = append(w.procs, p)
	}
	if err := awaitCentralListed(ctx, f.tc); err != nil {
		return nil, errors.Join(err, w.stop())
	}
	if err := sleepUntil(ctx, time.Now().Add(idleFor)); err != nil {
		return nil, errors.Join(err, w.stop())
	}
	var err error
	if w.idle, err = w.memory(); err != nil {
		return nil, errors.Join(err, w.stop())
	}
	return w, nil
}

// startWorker runs a central worker process on the fleet's store and dev
// server (startCentralProcess).
func (f *fleet) startWorker(ctx context.Context, name string) (*childProcess, error) {
	return f.r.startCentralProcess(ctx, name, config.Temporal{Address: f.addr, Namespace: namespace}, f.central, nil)
}

// startCentralProcess runs `outpost central --config <name>.yaml`: the
// central config c's store, mail and lists, Temporal at t (with its mutual
// TLS files when set), any free port for its page, JSON logs at info as in
// production, in <name>.log; env is added to its environment (the store's
// password).
func (r *run) startCentralProcess(ctx context.Context, name string, t config.Temporal, c config.Central, env []string) (*childProcess, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	temporal := map[string]any{"address": t.Address, "namespace": t.Namespace}
	if t.TLS {
		temporal["tls"], temporal["tls_server_name"] = true, t.TLSServerName
		temporal["tls_ca_file"], temporal["tls_cert_file"], temporal["tls_key_file"] = t.TLSCAFile, t.TLSCertFile, t.TLSKeyFile
	}
	store := map[string]any{"driver": c.Store.Driver, "path": c.Store.Path}
	if c.Store.DSN != "" {
		store["dsn"] = c.Store.DSN
	}
	data, err := yaml.Marshal(map[string]any{
		"temporal": temporal,
		"central": map[string]any{
			"store":  store,
			"listen": listen,
			"smtp":   map[string]any{"host": c.SMTP.Host, "port": c.SMTP.Port, "tls": c.SMTP.TLS, "timeout": c.SMTP.Timeout.String()},
			"lists":  c.Lists,
		},
		"log": map[string]any{"format": "json"},
	})
	if err != nil {
		return nil, fmt.Errorf("central config: %w", err)
	}
	path := r.path(name + ".yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, fmt.Errorf("central config: %w", err)
	}
	return startChild(ctx, "central worker", listen, r.path(name+".log"), env, "central", "--config", path)
}

// memory is every worker's RSS now and at its peak.
func (w *centralWorkers) memory() ([]memory, error) {
	mems := make([]memory, len(w.procs))
	for i, p := range w.procs {
		var err error
		if mems[i], err = p.memory(); err != nil {
			return nil, err
		}
	}
	return mems, nil
}

func (w *centralWorkers) stop() error {
	var errs []error
	for _, p := range w.procs {
		errs = append(errs, p.stop())
	}
	w.procs = nil
	return errors.Join(errs...)
}

// delivery is one timed run of notifications with some central workers.
type delivery struct {
	workers *centralWorkers
	n       int
	took    time.Duration
	use     usage
	// peaks is each worker's memory right after the run.
	peaks []memory
}

// deliver starts n central workers, warms them up, then times
// FleetNotifications notifications from every site at once until the sink
// has every email. The workers are stopped after the run when stop is
// set; the caller stops them otherwise.
func (f *fleet) deliver(ctx context.Context, n int, stop bool) (d delivery, err error) {
	if d.workers, err = f.startWorkers(ctx, n); err != nil {
		return d, err
	}
	if stop {
		defer func() { err = joinStop(err, d.workers.stop()) }()
	}
	warm := f.sites[:min(len(f.sites), 50)]
	f.r.step("fleet: warm-up, one notification from each of %d sites, untimed", len(warm))
	if _, err := f.box.time(ctx, len(warm), f.notify(warm, 1)); err != nil {
		return d, fmt.Errorf("fleet warm-up with %s: %w", plural(n, "central worker"), err)
	}
	per := f.r.opts.FleetNotifications
	d.n = len(f.sites) * per
	f.r.step("fleet: %s notifications, %d from each of %d sites at once, delivered by %s",
		thousands(int64(d.n)), per, len(f.sites), plural(n, "central worker"))
	before, err := f.mark(d.workers)
	if err != nil {
		return d, err
	}
	if d.took, err = f.box.time(ctx, d.n, f.notify(f.sites, per)); err != nil {
		return d, fmt.Errorf("fleet with %s: %w", plural(n, "central worker"), err)
	}
	after, err := f.mark(d.workers)
	if err != nil {
		return d, err
	}
	d.use = before.until(after)
	d.peaks, err = d.workers.memory()
	return d, err
}

// notify has every one of sites notify per times, one after the other,
// all sites at once.
func (f *fleet) notify(sites []*fleetSite, per int) func(context.Context) error {
	body := f.r.body()
	return func(ctx context.Context) error {
		return parallel(ctx, len(sites), len(sites), func(ctx context.Context, i int) error {
			for range per {
				if _, err := sites[i].client.Notify(ctx, benchList, benchSubject, body); err != nil {
					return fmt.Errorf("site %s: %w", sites[i].id, err)
				}
			}
			return nil
		})
	}
}

// ingest is the timed telemetry run and its baseline.
type ingest struct {
	changes, batches int
	// first is how long the senders took to send their first batch; took
	// is from then until central persisted the last.
	first, took time.Duration
	// raw are the bulk upserts' two halves, before and after.
	raw rounds
	use usage
}

// telemetry makes FleetCalls cached calls on every site with the senders
// stopped, reads every site's outbox (the baseline upserts the same
// changes), then starts every sender at once and times them from the first
// batch sent until central persisted every batch, between the two halves of
// the baseline.
func (f *fleet) telemetry(ctx context.Context, workers *centralWorkers) (in ingest, err error) {
	per := f.r.opts.FleetCalls
	f.r.step("fleet: %d cached calls from each of %d sites (%s), delivered on their immediate attempt; telemetry senders not yet running",
		per, len(f.sites), thousands(int64(per*len(f.sites))))
	if err := f.call(ctx, per); err != nil {
		return in, err
	}
	raw, err := f.outboxes(ctx, &in)
	if err != nil {
		return in, err
	}
	store, err := centralstore.OpenSQLite(ctx, f.central.Store.Path)
	if err != nil {
		return in, err
	}
	defer store.Close()
	upsert := func(batches []contract.TelemetryBatch) (time.Duration, error) {
		return timeBatches(ctx, batches, 1, func(ctx context.Context, b contract.TelemetryBatch) error {
			_, err := store.UpsertSiteCalls(ctx, b.Rows)
			return err
		})
	}
	half := len(raw) / 2
	f.r.step("fleet: bulk upsert of the same %s changes, first half", thousands(int64(in.changes)))
	first, err := upsert(raw[:half])
	if err != nil {
		return in, fmt.Errorf("fleet bulk upsert: %w", err)
	}
	f.r.step("fleet: every site's telemetry sender at once, %s changes in %s batches of up to %d, to %s",
		thousands(int64(in.changes)), thousands(int64(in.batches)), f.batch, plural(len(workers.procs), "central worker"))
	if in.first, in.took, in.use, err = f.timeTelemetry(ctx, workers, store, in.batches, per); err != nil {
		return in, err
	}
	f.r.step("fleet: bulk upsert, second half")
	second, err := upsert(raw[half:])
	if err != nil {
		return in, fmt.Errorf("fleet bulk upsert: %w", err)
	}
	in.raw = rounds{first, second}
	return in, f.requireIngested(ctx, store, per)
}

// call has every site make per cached calls, one after the other, all
// sites at once; each must be delivered on its immediate attempt.
func (f *fleet) call(ctx context.Context, per int) error {
	return parallel(ctx, len(f.sites), len(f.sites), func(ctx context.Context, i int) error {
		for range per {
			res, err := f.sites[i].client.Call(ctx, benchSystem, benchMethod, map[string]any{"note": "fleet"})
			if err != nil {
				return fmt.Errorf("site %s: %w", f.sites[i].id, err)
			}
			if res.Status != contract.StatusDelivered {
				return fmt.Errorf("site %s: cached call %s is %s after its immediate attempt: %s", f.sites[i].id, res.ID, res.Status, res.Error)
			}
		}
		return nil
	})
}

// rawPrefix renames the baseline's copies of the sites' changes: new rows
// in site_calls, as the ingested ones were.
const rawPrefix = "raw-"

// outboxes reads every site's unsent changes, counts them and the batches
// the senders will make of them into in, and returns the same changes
// renamed (rawPrefix) in the same batches.
func (f *fleet) outboxes(ctx context.Context, in *ingest) ([]contract.TelemetryBatch, error) {
	var raw []contract.TelemetryBatch
	for _, s := range f.sites {
		last, err := s.store.LastSeq(ctx)
		if err != nil {
			return nil, err
		}
		rows, err := s.store.TelemetryChanges(ctx, 0, int(last)+1)
		if err != nil {
			return nil, err
		}
		for start := 0; start < len(rows); start += f.batch {
			batch := contract.TelemetryBatch{SiteID: s.id, Rows: make([]contract.TrackedOperation, 0, f.batch)}
			for _, row := range rows[start:min(start+f.batch, len(rows))] {
				row.OperationID = rawPrefix + row.OperationID
				batch.Rows = append(batch.Rows, row)
			}
			raw = append(raw, batch)
			in.batches++
		}
		in.changes += len(rows)
	}
	return raw, nil
}

// timeTelemetry starts every site's telemetry sender and waits until they
// sent their batches and central's store holds every site's per calls
// Delivered. first is how long the first send took to come; took and use
// run from it to the last change written.
func (f *fleet) timeTelemetry(ctx context.Context, workers *centralWorkers, store *centralstore.Store, batches, per int) (first, took time.Duration, use usage, err error) {
	started := time.Now()
	for _, s := range f.sites {
		f.bg.run(ctx, s.telemetry.Run, nil)
	}
	count := func(of func(*sitedaemon.Telemetry) int64) int {
		n := 0
		for _, s := range f.sites {
			n += int(of(s.telemetry))
		}
		return n
	}
	// A backlog under a full batch waits site.telemetry_delay before it
	// goes: the senders' own wait, not central's work, so the clock starts
	// at the first send.
	err = waitFor(ctx, drainTimeout(batches*f.batch), nil, func(context.Context) (bool, error) {
		return count((*sitedaemon.Telemetry).Attempts) > 0, nil
	}, func() string { return "no telemetry batch sent yet" })
	if err != nil {
		return 0, 0, usage{}, fmt.Errorf("fleet telemetry: %w", err)
	}
	before, err := f.mark(workers)
	if err != nil {
		return 0, 0, usage{}, err
	}
	delivered, want := 0, per*len(f.sites)
	err = waitFor(ctx, drainTimeout(batches*f.batch), nil, func(ctx context.Context) (bool, error) {
		if count((*sitedaemon.Telemetry).Batches) < batches {
			return false, nil
		}
		delivered, err = f.deliveredInSiteCalls(ctx, store)
		return delivered == want, err
	}, func() string {
		return fmt.Sprintf("%s of %s telemetry batches sent, %s of %s calls Delivered in site_calls",
			thousands(int64(count((*sitedaemon.Telemetry).Batches))), thousands(int64(batches)), thousands(int64(delivered)), thousands(int64(want)))
	})
	if err != nil {
		return 0, 0, usage{}, fmt.Errorf("fleet telemetry: %w", err)
	}
	after, err := f.mark(workers)
	if err != nil {
		return 0, 0, usage{}, err
	}
	return before.at.Sub(started), after.at.Sub(before.at), before.until(after), nil
}

// requireIngested checks that every site's cursor passed its last change
// and that site_calls holds every call Delivered: a rate of rows that were
// lost would mean nothing.
func (f *fleet) requireIngested(ctx context.Context, store *centralstore.Store, per int) error {
	for _, s := range f.sites {
		cursor, err := s.store.TelemetryCursor(ctx)
		if err != nil {
			return err
		}
		if last, err := s.store.LastSeq(ctx); err != nil || cursor != last {
			return errors.Join(err, fmt.Errorf("fleet telemetry: site %s's cursor is at %d of %d", s.id, cursor, last))
		}
	}
	got, err := f.deliveredInSiteCalls(ctx, store)
	if err != nil {
		return err
	}
	if want := per * len(f.sites); got != want {
		return fmt.Errorf("fleet telemetry: %d of %d cached calls Delivered in site_calls", got, want)
	}
	return nil
}

// deliveredInSiteCalls is how many of the sites' cached calls site_calls
// holds Delivered.
func (f *fleet) deliveredInSiteCalls(ctx context.Context, store *centralstore.Store) (int, error) {
	var got int
	err := store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM site_calls
		WHERE source_site_id LIKE 'fleet-%' AND operation_id NOT LIKE ? AND status = ?`,
		rawPrefix+"%", string(contract.StatusDelivered)).Scan(&got)
	if err != nil {
		return 0, fmt.Errorf("fleet telemetry: count the ingested calls: %w", err)
	}
	return got, nil
}

// cpuMark is the CPU time used so far by the workers, the dev server, this
// process (the sites) and the machine.
type cpuMark struct {
	at           time.Time
	workers      []time.Duration
	server, self time.Duration
	machine      machineCPU
}

func (f *fleet) mark(w *centralWorkers) (cpuMark, error) {
	m := cpuMark{at: time.Now()}
	for _, p := range w.procs {
		cpu, err := processCPU(p.cmd.Process.Pid)
		if err != nil {
			return m, err
		}
		m.workers = append(m.workers, cpu)
	}
	var err error
	if m.server, err = processCPU(f.serverPID); err != nil {
		return m, err
	}
	if m.self, err = processCPU(os.Getpid()); err != nil {
		return m, err
	}
	m.machine, err = readMachineCPU()
	return m, err
}

// usage is the CPU used between two marks, in cores (CPU-seconds a
// second), and how busy the machine's cores were, 0 to 1.
type usage struct {
	workers       []float64
	server, sites float64
	machine       float64
}

func (m cpuMark) until(later cpuMark) usage {
	wall := later.at.Sub(m.at).Seconds()
	cores := func(d time.Duration) float64 { return d.Seconds() / wall }
	u := usage{server: cores(later.server - m.server), sites: cores(later.self - m.self)}
	for i := range m.workers {
		u.workers = append(u.workers, cores(later.workers[i]-m.workers[i]))
	}
	if total := later.machine.total - m.machine.total; total > 0 {
		u.machine = float64(later.machine.busy-m.machine.busy) / float64(total)
	}
	return u
}

func (u usage) String() string {
	return fmt.Sprintf("CPU in cores: central workers %s, dev server %.2f, the sites (this process) %.2f; the machine's cores %.0f%% busy",
		u.workerList(), u.server, u.sites, 100*u.machine)
}

// bound says why the dev server is the bottleneck (devServerBound,
// machineBound); empty when it is not.
func (u usage) bound() string {
	switch {
	case u.server >= devServerBound:
		return fmt.Sprintf("dev server bound: it used %.2f cores (≥ %.1f), the workers %s", u.server, devServerBound, u.workerList())
	case u.machine >= machineBound:
		return fmt.Sprintf("dev server bound: the machine's cores were %.0f%% busy (≥ %.0f%%), the dev server using %.2f cores, the workers %s",
			100*u.machine, 100*machineBound, u.server, u.workerList())
	}
	return ""
}

func (u usage) workerList() string {
	parts := make([]string, len(u.workers))
	for i, w := range u.workers {
		parts[i] = fmt.Sprintf("%.2f", w)
	}
	return strings.Join(parts, " + ")
}

// rows are the section's figures: the two runs' delivery rates, each
// worker's CPU beside the dev server's and its peak RSS beside its idle
// RSS, and the telemetry ingest rate beside the bulk upserts'.
func (f *fleet) rows(one, two delivery, in ingest, peaks []memory) []Row {
	sites := plural(len(f.sites), "site")
	rate := compare(SectionFleet, "fleet delivered, 2 central workers, "+sites, perSecond(two.n, two.took), "/s",
		Figure{Name: "1 central worker, same sites", Value: perSecond(one.n, one.took), Unit: "/s"}).atLeastRatio(1.5)
	if why := two.use.bound(); why != "" {
		rate = rate.unjudged(why)
	}
	rate = rate.withDetail("%s notifications (%d from each site at once) each run, first Notify to last email, %s. "+
		"1 worker: %.1f s, %s. 2 workers: %.1f s, %s. The target is judged only when, in the 2-worker run, "+
		"the dev server used under %.1f of a core and the machine's cores were under %.0f%% busy",
		thousands(int64(two.n)), f.r.opts.FleetNotifications, f.box.duplicates(),
		one.took.Seconds(), one.use, two.took.Seconds(), two.use, devServerBound, 100*machineBound)
	rows := []Row{rate, workerCPU("fleet central worker CPU, 1 worker", one.use.workers[0], one.use)}
	for i, cpu := range two.use.workers {
		rows = append(rows, workerCPU(fmt.Sprintf("fleet central worker %d of 2 CPU", i+1), cpu, two.use))
	}
	rows = append(rows, compare(SectionFleet, "fleet central worker peak RSS, 1 worker", one.peaks[0].peak, "MiB",
		Figure{Name: fmt.Sprintf("the same worker idle, %s after start", idleFor), Value: one.workers.idle[0].rss, Unit: "MiB"}).
		withDetail("VmHWM of the worker process after its deliveries (VmRSS then %.1f MiB)", one.peaks[0].rss))
	for i, peak := range peaks {
		rows = append(rows, compare(SectionFleet, fmt.Sprintf("fleet central worker %d of 2 peak RSS", i+1), peak.peak, "MiB",
			Figure{Name: fmt.Sprintf("the same worker idle, %s after start", idleFor), Value: two.workers.idle[i].rss, Unit: "MiB"}).
			atMost(100).withDetail("VmHWM of the worker process after its deliveries and the telemetry ingest (VmHWM after the deliveries %.1f MiB, VmRSS at the end %.1f MiB)",
			two.peaks[i].peak, peak.rss))
	}
	ingest := compare(SectionFleet, "fleet telemetry ingest, "+sites, perSecond(in.changes, in.took), "/s",
		Figure{Name: "bulk upsert of the same rows, 1 writer", Value: perSecond(in.changes, in.raw.total()), Unit: "/s"})
	return append(rows, ingest.atLeastRatio(0.5).withDetail(
		"%s changes (%d cached calls a site, two changes each) in %s batches of up to %d, every site's sender at once, to 2 central workers: "+
			"the first batch left %.1f s after the senders started (a backlog under a full batch waits site.telemetry_delay), "+
			"then %.1f s until central persisted the last, %s; bulk upserts %.1f s (halves %s)",
		thousands(int64(in.changes)), f.r.opts.FleetCalls, thousands(int64(in.batches)), f.batch,
		in.first.Seconds(), in.took.Seconds(), in.use, in.raw.total().Seconds(), in.raw))
}

// workerCPU is a worker's CPU beside the dev server's in the same run.
func workerCPU(measure string, cpu float64, use usage) Row {
	return compare(SectionFleet, measure, cpu, "cores", Figure{Name: "dev server CPU, same run", Value: use.server, Unit: "cores"}).
		withDetail("cores busy over the timed deliveries (CPU-seconds a second, from each process's CPU clock); %s", use)
}
