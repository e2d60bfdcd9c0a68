package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

// growthSmallCalls is how many cached calls the growth section's small
// store holds: the ids its Status requests ask for, and nothing else.
const growthSmallCalls = 1000

// growth measures whether the site's costs stay flat as its store grows:
// the enqueue of the enqueue section's target row (SDK Notify, 64 callers)
// and the Status of the status section (GET /v1/operations/{id} on a
// daemon process, central unreachable) on a store prefilled with
// GrowthRows buffered rows (half notifications, half cached calls with
// their tracking rows), each beside the same on a store of almost nothing,
// in the same run. The big store is removed when the section ends unless
// the run keeps its files.
func (r *run) growth(ctx context.Context) ([]Row, error) {
	n, calls := r.opts.GrowthRows, r.opts.GrowthRows/2
	big, small := r.path("growth-site.db"), r.path("growth-small-site.db")
	r.step("growth: prefill %s buffered rows (%s notifications, %s cached calls with their tracking rows)",
		thousands(int64(n)), thousands(int64(n-calls)), thousands(int64(calls)))
	start := time.Now()
	if err := prefill(ctx, big, r.body(), n-calls, calls); err != nil {
		return nil, err
	}
	fill := time.Since(start)
	r.step("growth: prefilled in %s", fill.Round(time.Second))
	if err := prefill(ctx, small, r.body(), 0, growthSmallCalls); err != nil {
		return nil, err
	}
	enq, err := r.growthEnqueue(ctx, big)
	if err != nil {
		return nil, err
	}
	lat, err := r.growthStatus(ctx, big, small, calls)
	if err != nil {
		return nil, err
	}
	held, err := countStore(ctx, big)
	if err != nil {
		return nil, err
	}
	r.removeStore("growth-site.db")
	return growthRows(n, fill, held, enq, lat), nil
}

// growthEnqueue times Notify from targetCallers callers on a fresh store
// for half of EnqueueDuration, on the big store for all of it, then on the
// fresh store again for the other half: what slows the machine meanwhile
// weighs on both sides.
func (r *run) growthEnqueue(ctx context.Context, big string) (growthEnqueued, error) {
	var e growthEnqueued
	empty, d := r.path("growth-empty-site.db"), r.opts.EnqueueDuration
	for _, side := range []struct {
		path string
		d    time.Duration
		to   *closedLoopRun
	}{{empty, d / 2, &e.empty}, {big, d, &e.big}, {empty, d - d/2, &e.empty}} {
		r.step("growth: SDK Notify, %d callers, %s, on %s", targetCallers, side.d, side.path)
		n, took, err := r.notifyFor(ctx, side.path, targetCallers, side.d)
		if err != nil {
			return e, fmt.Errorf("SDK Notify on %s: %w", side.path, err)
		}
		side.to.n, side.to.took = side.to.n+n, side.to.took+took
	}
	return e, nil
}

// growthEnqueued is what the enqueue runs on each store did.
type growthEnqueued struct {
	empty, big closedLoopRun
}

// closedLoopRun is operations completed and the time they took.
type closedLoopRun struct {
	n    int
	took time.Duration
}

func (c closedLoopRun) rate() float64 { return perSecond(c.n, c.took) }

// growthStatus starts a daemon process on each store (central unreachable)
// and times Status requests for random prefilled calls of each, one at a
// time, alternating between the two daemons.
func (r *run) growthStatus(ctx context.Context, big, small string, calls int) (lat growthLatencies, err error) {
	unreachable, err := freeAddr()
	if err != nil {
		return lat, err
	}
	r.step("growth: a site daemon process on each store, %s Status requests each", thousands(int64(r.opts.StatusRequests)))
	onBig, err := r.startSiteProcess(ctx, SectionGrowth, benchSite, big, unreachable)
	if err != nil {
		return lat, err
	}
	defer func() { err = joinStop(err, onBig.stop()) }()
	onSmall, err := r.startSiteProcess(ctx, SectionGrowth+"-small", benchSite, small, unreachable)
	if err != nil {
		return lat, err
	}
	defer func() { err = joinStop(err, onSmall.stop()) }()
	if err := checkStatus(ctx, onBig, callID(calls-1)); err != nil {
		return lat, fmt.Errorf("%w (site log: %s)", err, onBig.log)
	}
	if err := checkStatus(ctx, onSmall, callID(growthSmallCalls-1)); err != nil {
		return lat, fmt.Errorf("%w (site log: %s)", err, onSmall.log)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range statusWarmUp + r.opts.StatusRequests {
		onBigTook, err := timeGet(ctx, onBig, "/v1/operations/"+callID(rng.IntN(calls)))
		if err != nil {
			return lat, fmt.Errorf("%w (site log: %s)", err, onBig.log)
		}
		onSmallTook, err := timeGet(ctx, onSmall, "/v1/operations/"+callID(rng.IntN(growthSmallCalls)))
		if err != nil {
			return lat, fmt.Errorf("%w (site log: %s)", err, onSmall.log)
		}
		if i >= statusWarmUp {
			lat.big, lat.small = append(lat.big, onBigTook), append(lat.small, onSmallTook)
		}
	}
	return lat, nil
}

// growthLatencies are the timed Status requests on each store.
type growthLatencies struct {
	big, small []time.Duration
}

// storeCount is what a site store file holds.
type storeCount struct {
	buffer, tracking int
}

// countStore counts the buffer and tracking rows of the store at path, so
// the rows say what the measured store held.
func countStore(ctx context.Context, path string) (storeCount, error) {
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		return storeCount{}, err
	}
	defer db.Close()
	var c storeCount
	for _, q := range []struct {
		sql string
		to  *int
	}{{`SELECT count(*) FROM buffer`, &c.buffer}, {`SELECT count(*) FROM tracking`, &c.tracking}} {
		if err := db.QueryRowContext(ctx, q.sql).Scan(q.to); err != nil {
			return c, fmt.Errorf("count the rows of %s: %w", path, err)
		}
	}
	return c, nil
}

func growthRows(n int, fill time.Duration, held storeCount, enq growthEnqueued, lat growthLatencies) []Row {
	store := thousands(int64(n)) + "-row store"
	filled := fmt.Sprintf("prefilled %s rows in %.1f s (%s rows/s); the store held %s buffer rows and %s tracking rows at the end",
		thousands(int64(n)), fill.Seconds(), thousands(int64(perSecond(n, fill))), thousands(int64(held.buffer)), thousands(int64(held.tracking)))
	enqueue := compare(SectionGrowth, fmt.Sprintf("enqueue, %d callers (SDK Notify), %s", targetCallers, store), enq.big.rate(), "/s",
		Figure{Name: "the same on an empty store", Value: enq.empty.rate(), Unit: "/s"}).atLeastRatio(0.8).
		withDetail("%s; the empty store ran half before the big one and half after", filled)
	status := compare(SectionGrowth, "Status p99, "+store, ms(percentile(lat.big, 0.99)), "ms",
		Figure{Name: fmt.Sprintf("Status p99, store of %s calls", thousands(growthSmallCalls)), Value: ms(percentile(lat.small, 0.99)), Unit: "ms"}).atMostRatio(1.25).
		withDetail("GET /v1/operations/{id}, %s random prefilled ids on each store's daemon process, alternating; p50 %.2f ms against %.2f ms; %s",
			thousands(int64(len(lat.big))), ms(percentile(lat.big, 0.5)), ms(percentile(lat.small, 0.5)), filled)
	return []Row{enqueue, status}
}
