package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/site"
)

// latencyWorkers bounds the enqueues in flight during the latency section.
// An enqueue waiting for a free worker still counts from its due time, so
// the bound hides nothing; it only keeps a site that falls far behind from
// opening thousands of connections.
const latencyWorkers = 256

// latency offers Rate enqueues per second through the SDK for
// LatencyDuration, open loop: the i-th enqueue is due at start + i/Rate
// whatever happened to the ones before it, and its latency runs from that
// due time to Notify's return, so queueing behind a slow commit is counted
// (no coordinated omission). The baseline is one caller committing one raw
// row per transaction, back to back, unloaded: what a durable commit costs
// on this file system.
func (r *run) latency(ctx context.Context) ([]Row, error) {
	baseDuration := min(2*time.Second, r.opts.LatencyDuration)
	r.step("latency: one raw row per transaction, one caller, %s", baseDuration)
	base, err := r.commitLatencies(ctx, baseDuration)
	if err != nil {
		return nil, fmt.Errorf("commit latency: %w", err)
	}
	r.step("latency: SDK Notify, %s/s offered for %s", thousands(int64(r.opts.Rate)), r.opts.LatencyDuration)
	res, err := r.offeredLoad(ctx)
	if err != nil {
		return nil, fmt.Errorf("offered load: %w", err)
	}
	return latencyRows(r.opts.Rate, res, base), nil
}

func latencyRows(rate int, res openLoopResult, base []time.Duration) []Row {
	at := thousands(int64(rate)) + "/s offered"
	p99 := compare(SectionLatency, "enqueue p99, "+at, ms(percentile(res.latencies, 0.99)), "ms",
		Figure{Name: "1-row commit p99, 1 caller, unloaded", Value: ms(percentile(base, 0.99)), Unit: "ms"})
	p50 := compare(SectionLatency, "enqueue p50, "+at, ms(percentile(res.latencies, 0.50)), "ms",
		Figure{Name: "1-row commit p50, 1 caller, unloaded", Value: ms(percentile(base, 0.50)), Unit: "ms"})
	p99 = p99.atMost(10).withDetail("%s enqueues due over %s, achieved %s; p99.9 %.2f ms, max %.2f ms",
		thousands(int64(len(res.latencies))), res.offered, formatValue(perSecond(len(res.latencies), res.took), "/s"),
		ms(percentile(res.latencies, 0.999)), ms(slices.Max(res.latencies)))
	return []Row{p99, p50}
}

// commitLatencies times one-row transactions committed back to back by one
// caller for d, on a fresh file.
func (r *run) commitLatencies(ctx context.Context, d time.Duration) ([]time.Duration, error) {
	db, err := openRaw(ctx, r.path("latency-commit.db"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	maker := newRowMaker(r.body())
	var lat []time.Duration
	for end := time.Now().Add(d); time.Now().Before(end); {
		start := time.Now()
		if err := insertOne(ctx, db, maker); err != nil {
			return nil, err
		}
		lat = append(lat, time.Since(start))
	}
	return lat, nil
}

// openLoopResult is what an open-loop run measured.
type openLoopResult struct {
	// latencies are from each operation's due time to its return.
	latencies []time.Duration
	// offered is how long operations were being scheduled.
	offered time.Duration
	// took runs from the first due time until the last operation returned.
	took time.Duration
}

// offeredLoad runs the SDK's Notify at Rate for LatencyDuration on a fresh store.
func (r *run) offeredLoad(ctx context.Context) (openLoopResult, error) {
	c, err := site.Open(ctx, r.path("latency-sdk.db"), siteOptions())
	if err != nil {
		return openLoopResult{}, err
	}
	defer c.Close()
	body := r.body()
	notify := func(ctx context.Context) error {
		_, err := c.Notify(ctx, benchList, benchSubject, body)
		return err
	}
	if err := notify(ctx); err != nil { // warm up: the first write sets up the file
		return openLoopResult{}, err
	}
	return openLoop(ctx, r.opts.Rate, r.opts.LatencyDuration, notify)
}

// openLoop schedules rate operations per second for d at fixed times and
// runs each on a free worker; see latency.
func openLoop(ctx context.Context, rate int, d time.Duration, op func(context.Context) error) (openLoopResult, error) {
	n := max(1, int(float64(rate)*d.Seconds()))
	interval := time.Second / time.Duration(rate)
	due := make(chan int, n) // never blocks the schedule
	lat := make([]time.Duration, n)
	start := time.Now()
	dueAt := func(i int) time.Time { return start.Add(time.Duration(i) * interval) }
	g, ctx := errgroup.WithContext(ctx)
	for range latencyWorkers {
		g.Go(func() error {
			for i := range due {
				if err := op(ctx); err != nil {
					return err
				}
				lat[i] = time.Since(dueAt(i))
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(due)
		for i := range n {
			if err := sleepUntil(ctx, dueAt(i)); err != nil {
				return err
			}
			due <- i
		}
		return nil
	})
	err := g.Wait()
	return openLoopResult{latencies: lat, offered: time.Duration(n) * interval, took: time.Since(start)}, err
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	wait := time.Until(t)
	if wait <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// percentile is the nearest-rank p-quantile of ds (0 for none).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	rank := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
