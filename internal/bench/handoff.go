package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
)

// handoff measures the forwarder handing Handoff prefilled notifications to
// a dev server with no worker (so the server only starts workflows, and the
// forwarder, seeing no central worker that knows the started type, signals
// each submission with its start), each round from the forwarder's start
// until its buffer is empty, beside bare SignalWithStart calls of
// NotificationWorkflow with the forwarder's start options from the same
// parallelism, fresh ids. The two sides run in alternating rounds
// (handoffRounds): the server slows as its open workflows pile up, and a
// slow spell of the machine lands on a round of each side, not on the one
// run of one side that halves before and after would leave it.
func (r *run) handoff(ctx context.Context) (rows []Row, err error) {
	srv, err := r.startTemporal(ctx, SectionHandoff)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, srv.stop()) }()
	if err := r.warmUp(ctx, SectionHandoff, srv.client()); err != nil {
		return nil, err
	}
	n, p := r.opts.Handoff, r.opts.Parallelism
	r.step("handoff: %s notifications through the forwarder (each round's buffer prefilled, untimed) and %s bare SignalWithStart, %d in flight, in %d alternating rounds each",
		thousands(int64(n)), thousands(int64(n)), p, handoffRounds)
	forwarder := func(round int) (time.Duration, error) {
		took, err := r.forwardPrefilled(ctx, srv.client(), fmt.Sprintf("handoff-site-%d.db", round), share(n, handoffRounds, round))
		if err != nil {
			return 0, fmt.Errorf("forwarder, round %d: %w", round+1, err)
		}
		return took, nil
	}
	bare := func(round int) (time.Duration, error) {
		took, err := r.bareSignalWithStart(ctx, srv.client(), share(n, handoffRounds, round))
		if err != nil {
			return 0, fmt.Errorf("bare SignalWithStart, round %d: %w", round+1, err)
		}
		return took, nil
	}
	times, err := alternate(handoffRounds, forwarder, bare)
	if err != nil {
		return nil, err
	}
	fwd, sig := times[0], times[1]
	row := compare(SectionHandoff, fmt.Sprintf("handoff, %d in flight (forwarder)", p), perSecond(n, fwd.total()), "/s",
		Figure{Name: fmt.Sprintf("bare SignalWithStart, %d in flight", p), Value: perSecond(n, sig.total()), Unit: "/s"})
	return []Row{row.atLeastRatio(0.9).withDetail("%s notifications in %.2f s (rounds %s); bare: %.2f s (rounds %s)",
		thousands(int64(n)), fwd.total().Seconds(), fwd, sig.total().Seconds(), sig)}, nil
}

// handoffRounds is how many timed rounds each side of the handoff
// comparison runs, in the order forwarder, bare, bare, forwarder… (alternate).
const handoffRounds = 4

// bareRuns are the two timed halves of a bare loop.
type bareRuns struct {
	n             int
	before, after time.Duration
}

func (b bareRuns) took() time.Duration { return b.before + b.after }

func (b bareRuns) String() string {
	return fmt.Sprintf("%s calls in %.2f s (%.2f s before, %.2f s after)", thousands(int64(b.n)), b.took().Seconds(), b.before.Seconds(), b.after.Seconds())
}

// bareAround warms the server up, then runs measured between two halves of
// n bare SignalWithStart calls, so a server that slows as it fills weighs
// on both alike.
func (r *run) bareAround(ctx context.Context, section string, tc client.Client, n int, measured func() error) (bareRuns, error) {
	b := bareRuns{n: n}
	if err := r.warmUp(ctx, section, tc); err != nil {
		return b, err
	}
	r.step("%s: bare SignalWithStart, %s from %d in parallel, first half", section, thousands(int64(n/2)), r.opts.Parallelism)
	var err error
	if b.before, err = r.bareSignalWithStart(ctx, tc, n/2); err != nil {
		return b, fmt.Errorf("bare SignalWithStart: %w", err)
	}
	if err := measured(); err != nil {
		return b, err
	}
	r.step("%s: bare SignalWithStart, second half", section)
	if b.after, err = r.bareSignalWithStart(ctx, tc, n-n/2); err != nil {
		return b, fmt.Errorf("bare SignalWithStart: %w", err)
	}
	return b, nil
}

// warmUp makes untimed bare starts, so the first timed run does not pay
// for the fresh server's cold start.
func (r *run) warmUp(ctx context.Context, section string, tc client.Client) error {
	n := min(200, r.opts.Handoff/10+1)
	r.step("%s: warm-up, %d bare SignalWithStart, untimed", section, n)
	if _, err := r.bareSignalWithStart(ctx, tc, n); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return nil
}

// forwardPrefilled prefills a fresh store, the file name in the run's
// directory, with n notifications and runs a forwarder, wired as the
// daemon wires it (config defaults, the run's parallelism), until the
// buffer is empty; it returns the time from the forwarder's start.
func (r *run) forwardPrefilled(ctx context.Context, tc client.Client, name string, n int) (time.Duration, error) {
	path := r.path(name)
	if err := prefill(ctx, path, r.body(), n, 0); err != nil {
		return 0, err
	}
	cfg := config.Default().Site
	store, err := sitestore.Open(ctx, path, sitestore.Options{CommitBatch: cfg.CommitBatch, CommitDelay: cfg.CommitDelay})
	if err != nil {
		return 0, err
	}
	defer store.Close()
	fwd := sitedaemon.NewForwarder(store, targets.New(nil, nil), tc, sitedaemon.ForwarderOptions{
		Interval: cfg.ForwardInterval, Batch: cfg.ForwardBatch, Parallelism: r.opts.Parallelism, MaxInFlight: cfg.ForwardMaxInFlight, PollInterval: cfg.PollInterval,
	}, r.log.Named("forwarder"))
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- fwd.Run(runCtx) }()
	err = waitEmpty(ctx, store.Depth, n, nil, nil)
	took := time.Since(start)
	stop()
	return took, joinStop(err, <-done)
}

// waitEmpty waits until depth reports an empty buffer (n rows at the
// start); observe, when not nil, sees every depth read.
func waitEmpty(ctx context.Context, depth func(context.Context) (int, error), n int, exited <-chan struct{}, observe func(int)) error {
	left := n
	return waitFor(ctx, drainTimeout(n), exited, func(ctx context.Context) (bool, error) {
		d, err := depth(ctx)
		if err == nil && observe != nil {
			observe(d)
		}
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
		_, err := tc.SignalWithStartWorkflow(ctx, contract.NotificationWorkflowID(sub.NotificationID), contract.SignalSubmit,
			sub, sitedaemon.NotificationStartOptions(sub, false), contract.WorkflowNotification)
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
