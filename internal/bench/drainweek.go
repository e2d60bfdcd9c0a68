package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/outpost-dev/outpost/internal/linkproxy"
	"github.com/outpost-dev/outpost/site"
)

// weekPoll is how often the drain-week section counts the buffer of a
// backlog of n: counting costs in proportion to the rows, so every n
// microseconds (a second at a million), and the count takes as much of
// the machine the drain needs at any size and at the end as at the start.
func weekPoll(n int) time.Duration {
	return min(max(time.Duration(n)*time.Microsecond, 10*time.Millisecond), time.Second)
}

// weekBursts are the depths, in parts of the backlog, at which scripts
// enqueue during the drain: away from its first and last tenth, which
// time the drain alone.
var weekBursts = []float64{0.75, 0.5, 0.25}

// drainWeek is a week-long outage drained: WeekBacklog notifications
// prefilled, a site daemon process started on them whose Temporal address
// is a link proxy in this process, cut: central is unreachable. Scripts
// enqueue on its store (the enqueue alone: the daemon forwards nothing);
// a dev server with no worker and its state on disk (startTemporalOnDisk)
// starts behind the proxy, and bare
// SignalWithStart calls time it fresh; the proxy heals and the daemon
// drains the backlog while the scripts enqueue at three depths; once the
// buffer is empty the proxy is cut again, the scripts enqueue alone once
// more, and bare calls time the server full. The rows: the drain's rate
// over the last tenth of the backlog against its first tenth (unjudged
// when the bare calls show the server itself slowed past the target), the
// daemon's peak RSS over it all against an idle daemon's, and the enqueue
// during the drain against the enqueue alone.
func (r *run) drainWeek(ctx context.Context) (rows []Row, err error) {
	n, store := r.opts.WeekBacklog, r.path("drain-week-site.db")
	r.step("drain-week: prefill %s notifications", thousands(int64(n)))
	if err := prefill(ctx, store, r.body(), n, 0); err != nil {
		return nil, err
	}
	link, err := linkproxy.Listen()
	if err != nil {
		return nil, err
	}
	defer link.Close()
	link.Cut()
	p, err := r.startSiteProcess(ctx, SectionDrainWeek, benchSite, store, link.Addr())
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, p.stop()) }()
	scripts, err := site.Open(ctx, store, siteOptions())
	if err != nil {
		return nil, err
	}
	defer scripts.Close()
	w := &weekDrain{r: r, n: n, scripts: scripts, daemon: p, burst: max(n/50, targetCallers), aloneCPU: &burstCPU{}, duringCPU: &burstCPU{}}
	if err := w.enqueue(ctx, &w.alone, w.aloneCPU, "before the drain, central unreachable"); err != nil {
		return nil, err
	}
	srv, err := r.startTemporalOnDisk(ctx, SectionDrainWeek)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, srv.stop()) }()
	link.SetTarget(srv.addr)
	if w.serverPID, err = srv.pid(); err != nil {
		return nil, err
	}
	bare, err := r.bareAround(ctx, SectionDrainWeek, srv.client(), min(r.opts.Handoff, n), func() error {
		link.Heal()
		if err := w.drain(ctx); err != nil {
			return fmt.Errorf("%w (site log: %s)", err, p.log)
		}
		link.Cut()
		return w.enqueue(ctx, &w.alone, w.aloneCPU, "after the drain, central unreachable")
	})
	if err != nil {
		return nil, err
	}
	mem, err := p.memory()
	if err != nil {
		return nil, err
	}
	if err := p.stop(); err != nil {
		return nil, err
	}
	idle, err := r.idleSite(ctx, SectionDrainWeek+"-idle", srv.addr)
	if err != nil {
		return nil, fmt.Errorf("idle daemon: %w", err)
	}
	return w.rows(mem, idle, p.cpu(), bare), nil
}

// weekDrain is the drain-week section under way.
type weekDrain struct {
	r       *run
	n       int
	scripts *site.Client
	daemon  *childProcess
	// burst is how many Notify calls each enqueue makes.
	burst int
	// alone and during are the enqueues without the drain and during it,
	// aloneCPU and duringCPU what the daemon and the dev server used
	// meanwhile.
	alone, during       []closedLoopRun
	aloneCPU, duringCPU *burstCPU
	// serverPID is the dev server's process, once it runs.
	serverPID int
	// first and last are the first and the last tenth of the backlog,
	// between two counts of the buffer each; all is the whole drain, from
	// the count that saw the first hand-off, of every row it handed off
	// (the backlog and the enqueues' rows).
	first, last, all closedLoopRun
	// drained is every row the daemon handed off.
	drained int
}

// enqueue times burst Notify calls from targetCallers scripts, adds the
// run to runs and the CPU the daemon and the dev server used meanwhile to
// cpu: the machine's cores are what the scripts share with them.
func (w *weekDrain) enqueue(ctx context.Context, runs *[]closedLoopRun, cpu *burstCPU, when string) error {
	w.r.step("drain-week: scripts enqueue %s notifications, %d at a time, %s", thousands(int64(w.burst)), targetCallers, when)
	body := w.r.body()
	before, err := w.cpu()
	if err != nil {
		return err
	}
	start := time.Now()
	err = parallel(ctx, w.burst, targetCallers, func(ctx context.Context, _ int) error {
		_, err := w.scripts.Notify(ctx, benchList, benchSubject, body)
		return err
	})
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", when, err)
	}
	run := closedLoopRun{n: w.burst, took: time.Since(start)}
	after, err := w.cpu()
	if err != nil {
		return err
	}
	*runs = append(*runs, run)
	cpu.daemon += after.daemon - before.daemon
	cpu.server += after.server - before.server
	cpu.took += run.took
	return nil
}

// burstCPU is the CPU the daemon and the dev server used over enqueues
// that took took.
type burstCPU struct {
	daemon, server, took time.Duration
}

// cores is each one's CPU a second of the enqueues.
func (c burstCPU) String() string {
	return fmt.Sprintf("the daemon %.2f cores, the dev server %.2f", c.daemon.Seconds()/c.took.Seconds(), c.server.Seconds()/c.took.Seconds())
}

// cpu reads the daemon's and the dev server's CPU so far (the server's 0
// before it runs).
func (w *weekDrain) cpu() (burstCPU, error) {
	var c burstCPU
	var err error
	if c.daemon, err = processCPU(w.daemon.cmd.Process.Pid); err != nil {
		return c, err
	}
	if w.serverPID != 0 {
		c.server, err = processCPU(w.serverPID)
	}
	return c, err
}

// drain counts the buffer every weekPoll until it is empty, noting the
// counts around its first and last tenth, and lets the scripts enqueue at
// each of weekBursts.
func (w *weekDrain) drain(ctx context.Context) error {
	backlog, err := w.scripts.BufferDepth(ctx)
	if err != nil {
		return err
	}
	w.r.step("drain-week: the daemon drains %s buffered notifications", thousands(int64(backlog)))
	initial := backlog
	timeout := drainTimeout(backlog + len(weekBursts)*w.burst)
	deadline := time.Now().Add(timeout)
	bursts, tenth := weekBursts, w.n/10
	var start, firstFrom, lastFrom weekCount
	for depth := backlog; depth > 0; {
		if err := w.wait(ctx, deadline, timeout, depth); err != nil {
			return err
		}
		if depth, err = w.scripts.BufferDepth(ctx); err != nil {
			return err
		}
		now := weekCount{at: time.Now(), depth: depth}
		switch {
		case start.at.IsZero():
			if depth < backlog {
				start, firstFrom = now, now
			}
		case w.first.n == 0:
			if depth <= firstFrom.depth-tenth {
				w.first = firstFrom.until(now)
				w.r.step("drain-week: the first tenth drained at %.0f/s", w.first.rate())
			}
		case len(bursts) > 0:
			if depth <= int(bursts[0]*float64(backlog)) {
				if err := w.enqueue(ctx, &w.during, w.duringCPU, fmt.Sprintf("during the drain (%s buffered)", thousands(int64(depth)))); err != nil {
					return err
				}
				bursts, backlog = bursts[1:], backlog+w.burst
			}
		case lastFrom.at.IsZero():
			if depth <= tenth {
				lastFrom = now
			}
		}
	}
	if lastFrom.at.IsZero() {
		return fmt.Errorf("a backlog of %s drained faster than its buffer was counted (every %s): too small to time its tenths", thousands(int64(w.n)), weekPoll(w.n))
	}
	end := time.Now()
	w.last = lastFrom.until(weekCount{at: end})
	// From the first count that saw a hand-off: the rows buffered then and
	// those the scripts added.
	w.all = closedLoopRun{n: start.depth + backlog - initial, took: end.Sub(start.at)}
	w.drained = backlog
	return nil
}

// weekCount is a count of the buffer and when it was made.
type weekCount struct {
	at    time.Time
	depth int
}

// until is the rows drained from c to a later count.
func (c weekCount) until(later weekCount) closedLoopRun {
	return closedLoopRun{n: c.depth - later.depth, took: later.at.Sub(c.at)}
}

// wait sleeps weekPoll, or fails when the deadline passed or the daemon
// exited.
func (w *weekDrain) wait(ctx context.Context, deadline time.Time, timeout time.Duration, depth int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-w.daemon.done:
		return fmt.Errorf("the site daemon exited with %s notifications buffered", thousands(int64(depth)))
	case <-time.After(weekPoll(w.n)):
	}
	if time.Now().After(deadline) {
		return fmt.Errorf("%s notifications still buffered after %s", thousands(int64(depth)), timeout)
	}
	return nil
}

// weekTarget is the least the last tenth's rate may be of the first's.
const weekTarget = 0.8

func (w *weekDrain) rows(mem, idle memory, cpu time.Duration, bare bareRuns) []Row {
	backlog := thousands(int64(w.n))
	rate := compare(SectionDrainWeek, "drain "+backlog+" backlog: rate over its last 10%", w.last.rate(), "/s",
		Figure{Name: "rate over its first 10%, same drain", Value: w.first.rate(), Unit: "/s"}).atLeastRatio(weekTarget).
		withDetail("first: %s notifications in %.1f s, last: %s in %.1f s; the daemon process drained %s (the backlog and the scripts' %s), %s of them in %.1f s (%.0f/s) from the first count that saw a hand-off, using %.1f CPU-s from its start; the buffer counted every %s; the dev server alone: %s",
			thousands(int64(w.first.n)), w.first.took.Seconds(), thousands(int64(w.last.n)), w.last.took.Seconds(),
			thousands(int64(w.drained)), thousands(int64(w.drained-w.n)), thousands(int64(w.all.n)), w.all.took.Seconds(), w.all.rate(), cpu.Seconds(), weekPoll(w.n), bare)
	// The dev server keeps every workflow in memory and slows as it
	// fills: when its own starts slowed past the target, the drain's
	// ratio says nothing about the site.
	if slowed := bare.before.Seconds() / bare.after.Seconds() * float64(bare.n-bare.n/2) / float64(bare.n/2); slowed < weekTarget {
		rate = rate.unjudged(fmt.Sprintf("the dev server slowed as it filled: bare SignalWithStart ran at %.2f× its fresh rate after the drain", slowed))
	}
	peak := compare(SectionDrainWeek, "drain "+backlog+": site peak RSS", mem.peak, "MiB",
		Figure{Name: "idle site daemon, empty store", Value: idle.peak, Unit: "MiB"}).atMost(100).
		withDetail("VmHWM of the daemon process over the whole drain and the enqueues (VmRSS %.1f MiB at the end); idle: VmHWM after %s", mem.rss, idleFor)
	during, alone := sumRuns(w.during), sumRuns(w.alone)
	enqueue := compare(SectionDrainWeek, fmt.Sprintf("enqueue, %d callers (SDK Notify), during the %s drain", targetCallers, backlog), during.rate(), "/s",
		Figure{Name: "the same alone, same daemon, before and after", Value: alone.rate(), Unit: "/s"}).atLeastRatio(0.8).
		withDetail("%s notifications each time, on the daemon's store file; during, at three depths: %s; alone (central unreachable): before the drain %s, after it %s; meanwhile, during: %s; alone: %s (of the machine's %d)",
			thousands(int64(w.burst)), runRates(w.during), runRates(w.alone[:1]), runRates(w.alone[1:]), w.duringCPU, w.aloneCPU, runtime.NumCPU())
	return []Row{rate, peak, enqueue}
}

func sumRuns(runs []closedLoopRun) closedLoopRun {
	var sum closedLoopRun
	for _, c := range runs {
		sum.n, sum.took = sum.n+c.n, sum.took+c.took
	}
	return sum
}

// runRates lists each run's rate: "41,230/s, 40,112/s and 39,872/s".
func runRates(runs []closedLoopRun) string {
	rs := make([]float64, len(runs))
	for i, c := range runs {
		rs[i] = c.rate()
	}
	return rates(rs)
}
