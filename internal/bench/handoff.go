package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/workflows"
)

// handoff measures the forwarder handing Handoff prefilled notifications to
// a dev server with no worker (so the server only starts workflows), from
// the moment it starts until the buffer is empty, beside bare
// SignalWithStart calls of NotificationWorkflow with the forwarder's start
// options from the same parallelism, fresh ids. The bare loop runs half
// before and half after the forwarder, so a server that slows as it fills
// weighs on both alike.
func (r *run) handoff(ctx context.Context) (rows []Row, err error) {
	srv, err := r.startTemporal(ctx, SectionHandoff)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, srv.stop()) }()
	n, p := r.opts.Handoff, r.opts.Parallelism
	if err := r.warmUp(ctx, srv.client()); err != nil {
		return nil, err
	}
	r.step("handoff: bare SignalWithStart, %s in %d-wide parallel, first half", thousands(int64(n/2)), p)
	bare1, err := r.bareSignalWithStart(ctx, srv.client(), n/2)
	if err != nil {
		return nil, fmt.Errorf("bare SignalWithStart: %w", err)
	}
	r.step("handoff: prefill %s notifications, then the forwarder hands them off", thousands(int64(n)))
	fwd, err := r.forwardPrefilled(ctx, srv.client())
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	r.step("handoff: bare SignalWithStart, second half")
	bare2, err := r.bareSignalWithStart(ctx, srv.client(), n-n/2)
	if err != nil {
		return nil, fmt.Errorf("bare SignalWithStart: %w", err)
	}
	row := compare(SectionHandoff, fmt.Sprintf("handoff, %d in flight (forwarder)", p), perSecond(n, fwd), "/s",
		Figure{Name: fmt.Sprintf("bare SignalWithStart, %d in flight", p), Value: perSecond(n, bare1+bare2), Unit: "/s"})
	return []Row{row.atLeastRatio(0.9).withDetail("%s notifications in %.2f s; the bare loop took %.2f s (%.2f s before, %.2f s after)",
		thousands(int64(n)), fwd.Seconds(), (bare1 + bare2).Seconds(), bare1.Seconds(), bare2.Seconds())}, nil
}

// warmUp makes untimed bare starts, so the first timed run does not pay
// for the fresh server's cold start.
func (r *run) warmUp(ctx context.Context, tc client.Client) error {
	n := min(200, r.opts.Handoff/10+1)
	r.step("warm-up: %d bare SignalWithStart, untimed", n)
	if _, err := r.bareSignalWithStart(ctx, tc, n); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// forwardPrefilled prefills a fresh store with Handoff notifications and
// runs a forwarder, wired as the daemon wires it (config defaults, the
// run's parallelism), until the buffer is empty; it returns the time from
// the forwarder's start.
func (r *run) forwardPrefilled(ctx context.Context, tc client.Client) (time.Duration, error) {
	path := r.path("handoff-site.db")
	if err := prefill(ctx, path, r.body(), r.opts.Handoff, 0); err != nil {
		return 0, err
	}
	store, err := sitestore.Open(ctx, path, sitestore.Options{})
	if err != nil {
		return 0, err
	}
	defer store.Close()
	cfg := config.Default().Site
	fwd := site.NewForwarder(store, targets.New(nil, nil), tc, site.ForwarderOptions{
		Interval: cfg.ForwardInterval, Batch: cfg.ForwardBatch, Parallelism: r.opts.Parallelism, PollInterval: cfg.PollInterval,
	}, r.log.Named("forwarder"))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- fwd.Run(runCtx) }()
	err = waitEmpty(ctx, store.Depth, r.opts.Handoff, nil)
	took := time.Since(start)
	stop()
	return took, joinStop(err, <-done)
}

// waitEmpty waits until depth reports an empty buffer (n rows at the start).
func waitEmpty(ctx context.Context, depth func(context.Context) (int, error), n int, exited <-chan error) error {
	left := n
	return waitFor(ctx, drainTimeout(n), exited, func(ctx context.Context) (bool, error) {
		d, err := depth(ctx)
		left = d
		return err == nil && d == 0, err
	}, func() string {
		return fmt.Sprintf("%s of %s operations still buffered", thousands(int64(left)), thousands(int64(n)))
	})
}

// bareSignalWithStart makes n SignalWithStartWorkflow calls of
// NotificationWorkflow, as the forwarder would, with fresh ids, Parallelism
// at once, and returns how long they took.
func (r *run) bareSignalWithStart(ctx context.Context, tc client.Client, n int) (time.Duration, error) {
	body := r.body()
	start := time.Now()
	err := parallel(ctx, n, r.opts.Parallelism, func(ctx context.Context, _ int) error {
		sub := submission(uuid.NewString(), body, time.Now())
		_, err := tc.SignalWithStartWorkflow(ctx, workflows.NotificationWorkflowID(sub.NotificationID), workflows.SignalSubmit,
			sub, site.NotificationStartOptions(sub), workflows.NotificationWorkflow)
		return err
	})
	return time.Since(start), err
}

// joinStop adds the error of stopping something to the section's error.
func joinStop(err, stopErr error) error {
	if err != nil || stopErr == nil {
		return err
	}
	return fmt.Errorf("stop: %w", stopErr)
}
