package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/site"
)

// drain prefills a store with Drain notifications, starts a site daemon
// process on it against a fresh dev server with no worker, and times it
// from the process's start until its buffer is empty; its peak RSS is
// compared with an idle daemon's. The rate's baseline is as many bare
// SignalWithStart calls as the backlog, on the same server at the same
// parallelism, half before and half after the drain (bareAround). A
// shorter baseline flatters the bare calls: the dev server answers a burst
// of 2,500 starts at about twice the rate it sustains over 50,000 (510/s
// against 248/s in one run), whoever makes them, so the drain was judged
// against a rate no sustained stream reaches.
func (r *run) drain(ctx context.Context) (rows []Row, err error) {
	srv, err := r.startTemporal(ctx, SectionDrain)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, srv.stop()) }()
	idle, err := r.idleSite(ctx, SectionDrain+"-idle", srv.addr)
	if err != nil {
		return nil, fmt.Errorf("idle daemon: %w", err)
	}
	n := r.opts.Drain
	var res drained
	bare, err := r.bareAround(ctx, SectionDrain, srv.client(), n, func() error {
		var err error
		res, err = r.drainBacklog(ctx, srv.addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return drainRows(n, r.opts.Parallelism, res, bare, idle), nil
}

func drainRows(n, parallelism int, res drained, bare bareRuns, idle memory) []Row {
	backlog := thousands(int64(n))
	rate := compare(SectionDrain, "drain "+backlog+" backlog (daemon process)", perSecond(n, res.took), "/s",
		Figure{Name: fmt.Sprintf("bare SignalWithStart, %d in flight, %s", parallelism, thousands(int64(bare.n))), Value: perSecond(bare.n, bare.took()), Unit: "/s"}).
		atLeastRatio(0.9).withDetail("%s notifications in %.1f s, from the daemon's start to an empty buffer (%s); the daemon used %.1f CPU-s (%.0f%% of one core); bare: %s",
		backlog, res.took.Seconds(), res.timeline, res.cpu.Seconds(), 100*res.cpu.Seconds()/res.took.Seconds(), bare)
	peak := compare(SectionDrain, "drain "+backlog+": site peak RSS", res.mem.peak, "MiB",
		Figure{Name: "idle site daemon, empty store", Value: idle.peak, Unit: "MiB"}).
		withDetail("VmHWM of the daemon process (VmRSS %.1f MiB when the buffer was empty); idle: VmHWM after %s", res.mem.rss, idleFor)
	return []Row{rate, peak}
}

// drained is what draining the backlog took.
type drained struct {
	took     time.Duration
	timeline *timeline
	// mem is the daemon's memory when its buffer was empty.
	mem memory
	// cpu is the daemon's CPU time, start to stop.
	cpu time.Duration
}

// drainBacklog prefills the drain store, runs the daemon process on it
// until the buffer is empty, then reads its memory and stops it.
func (r *run) drainBacklog(ctx context.Context, temporalAddr string) (res drained, err error) {
	n, store := r.opts.Drain, r.path("drain-site.db")
	r.step("drain: prefill %s notifications", thousands(int64(n)))
	if err := prefill(ctx, store, r.body(), n, 0); err != nil {
		return res, err
	}
	watch, err := site.Open(ctx, store, siteOptions()) // only reads the depth
	if err != nil {
		return res, err
	}
	defer watch.Close()
	r.step("drain: a site daemon process hands them off")
	res.timeline = &timeline{n: n, start: time.Now()}
	p, err := r.startSiteProcess(ctx, SectionDrain, benchSite, store, temporalAddr)
	if err != nil {
		return res, err
	}
	defer func() { err = joinStop(err, p.stop()) }()
	if err := waitEmpty(ctx, watch.BufferDepth, n, p.done, res.timeline.observe); err != nil {
		return res, fmt.Errorf("%w (site log: %s)", err, p.log)
	}
	res.took = time.Since(res.timeline.start)
	if res.mem, err = p.memory(); err != nil {
		return res, err
	}
	if err := p.stop(); err != nil {
		return res, err
	}
	res.cpu = p.cpu()
	return res, nil
}

// timeline notes when a draining backlog of n first fell to each fifth of
// its size: a drain that slows as it goes shows here.
type timeline struct {
	n     int
	start time.Time
	// marks[k] is when the depth first was at most n*(4-k)/5.
	marks []time.Duration
}

func (t *timeline) observe(depth int) {
	for len(t.marks) < 5 && depth <= t.n*(4-len(t.marks))/5 {
		t.marks = append(t.marks, time.Since(t.start))
	}
}

// String lists how long each fifth took.
func (t *timeline) String() string {
	parts := make([]string, len(t.marks))
	var last time.Duration
	for i, m := range t.marks {
		parts[i] = strconv.FormatFloat((m - last).Seconds(), 'f', 1, 64)
		last = m
	}
	return "each fifth of it took " + strings.Join(parts, ", ") + " s"
}
