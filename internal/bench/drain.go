package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/site"
)

// drain prefills a store with Drain notifications, starts a site daemon
// process on it against a fresh dev server with no worker, and times it
// from the process's start until its buffer is empty; its peak RSS is
// compared with an idle daemon's. The rate's baseline is min(Drain,
// Handoff) bare SignalWithStart calls on the same server at the same
// parallelism, half before and half after the drain (bareAround).
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
	var took time.Duration
	var mem memory
	bare, err := r.bareAround(ctx, SectionDrain, srv.client(), min(n, r.opts.Handoff), func() error {
		var err error
		took, mem, err = r.drainBacklog(ctx, srv.addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	backlog := thousands(int64(n))
	rate := compare(SectionDrain, "drain "+backlog+" backlog (daemon process)", perSecond(n, took), "/s",
		Figure{Name: fmt.Sprintf("bare SignalWithStart, %d in flight", r.opts.Parallelism), Value: perSecond(bare.n, bare.took()), Unit: "/s"}).
		withDetail("%s notifications in %.1f s, from the daemon's start to an empty buffer; bare: %s", backlog, took.Seconds(), bare)
	peak := compare(SectionDrain, "drain "+backlog+": site peak RSS", mem.peak, "MiB",
		Figure{Name: "idle site daemon, empty store", Value: idle.peak, Unit: "MiB"}).
		withDetail("VmHWM of the daemon process (VmRSS %.1f MiB when the buffer was empty); idle: VmHWM after %s", mem.rss, idleFor)
	return []Row{rate, peak}, nil
}

// drainBacklog prefills the drain store, runs the daemon process on it
// until the buffer is empty and returns the time that took and the
// daemon's memory then.
func (r *run) drainBacklog(ctx context.Context, temporalAddr string) (took time.Duration, mem memory, err error) {
	n, store := r.opts.Drain, r.path("drain-site.db")
	r.step("drain: prefill %s notifications", thousands(int64(n)))
	if err := prefill(ctx, store, r.body(), n, 0); err != nil {
		return 0, memory{}, err
	}
	watch, err := site.Open(ctx, store, siteOptions()) // only reads the depth
	if err != nil {
		return 0, memory{}, err
	}
	defer watch.Close()
	r.step("drain: a site daemon process hands them off")
	start := time.Now()
	p, err := r.startSiteProcess(ctx, SectionDrain, store, temporalAddr)
	if err != nil {
		return 0, memory{}, err
	}
	defer func() { err = joinStop(err, p.stop()) }()
	if err := waitEmpty(ctx, watch.BufferDepth, n, p.done); err != nil {
		return 0, memory{}, fmt.Errorf("%w (site log: %s)", err, p.log)
	}
	took = time.Since(start)
	mem, err = p.memory()
	return took, mem, err
}
