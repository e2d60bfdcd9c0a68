package bench

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
)

// Polling intervals: short next to the runs they time. A daemon in its own
// process is polled less often, so the polling takes little of the CPU it
// needs.
const (
	pollEvery        = 10 * time.Millisecond
	pollProcessEvery = 100 * time.Millisecond
)

// parallel runs op for 0…n-1 with at most p calls in flight and stops at
// the first error.
func parallel(ctx context.Context, n, p int, op func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(p)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return op(ctx, i) })
	}
	return g.Wait()
}

// waitFor polls done until it reports true, fails, the process behind is
// gone (exited is closed; nil: no process), or timeout passes; what
// describes the state for the error. A process is polled every
// pollProcessEvery, anything else every pollEvery.
func waitFor(ctx context.Context, timeout time.Duration, exited <-chan struct{}, done func(context.Context) (bool, error), what func() string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	every := pollEvery
	if exited != nil {
		every = pollProcessEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		ok, err := done(ctx)
		switch {
		case ok:
			return nil
		case err != nil && ctx.Err() == nil:
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s after %s: %w", what(), timeout, ctx.Err())
		case <-exited:
			return fmt.Errorf("the process behind exited early, %s (see its log)", what())
		case <-tick.C:
		}
	}
}

// drainTimeout bounds waiting for n operations to get through: far more
// than any healthy run needs, so only a stall ends there.
func drainTimeout(n int) time.Duration { return 2*time.Minute + time.Duration(n)*20*time.Millisecond }

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
