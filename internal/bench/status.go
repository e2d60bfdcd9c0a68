package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// statusWarmUp is how many untimed requests of each kind come first.
const statusWarmUp = 100

// status prefills a store with Rows buffered rows (half notifications, half
// cached calls with their tracking rows), starts a site daemon process on
// it with central unreachable (nothing listens at its Temporal address), so
// the rows stay put, and times GET /v1/operations/{id} (Tracking.Status
// over the site API) for random prefilled ids, one request at a time,
// alternating with GET /healthz on the same daemon: the baseline is the
// same round trip without the store. Then it reads the daemon's RSS,
// compared with an idle daemon's.
func (r *run) status(ctx context.Context) (rows []Row, err error) {
	calls := r.opts.Rows / 2
	store := r.path("status-site.db")
	r.step("status: prefill %s buffered rows (%s notifications, %s cached calls with their tracking rows)",
		thousands(int64(r.opts.Rows)), thousands(int64(r.opts.Rows-calls)), thousands(int64(calls)))
	start := time.Now()
	if err := prefill(ctx, store, r.body(), r.opts.Rows-calls, calls); err != nil {
		return nil, err
	}
	r.step("status: prefilled in %s", time.Since(start).Round(time.Second))
	unreachable, err := freeAddr()
	if err != nil {
		return nil, err
	}
	idle, err := r.idleSite(ctx, SectionStatus+"-idle", unreachable)
	if err != nil {
		return nil, fmt.Errorf("idle daemon: %w", err)
	}
	r.step("status: site daemon process on the prefilled store, %s Status requests", thousands(int64(r.opts.StatusRequests)))
	p, err := r.startSiteProcess(ctx, SectionStatus, benchSite, store, unreachable)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, p.stop()) }()
	lat, err := timeStatus(ctx, p, calls, r.opts.StatusRequests)
	if err != nil {
		return nil, fmt.Errorf("%w (site log: %s)", err, p.log)
	}
	mem, err := p.memory()
	if err != nil {
		return nil, err
	}
	return statusRows(r.opts.Rows, lat, mem, idle), nil
}

func statusRows(n int, lat statusLatencies, mem, idle memory) []Row {
	with := thousands(int64(n)) + " rows"
	p99 := compare(SectionStatus, "Status p99, "+with, ms(percentile(lat.status, 0.99)), "ms",
		Figure{Name: "GET /healthz p99, same daemon", Value: ms(percentile(lat.health, 0.99)), Unit: "ms"}).atMost(1).
		withDetail("GET /v1/operations/{id}, %s random ids of the prefilled calls, one at a time; p99.9 %.2f ms; the daemon's central is unreachable",
			thousands(int64(len(lat.status))), ms(percentile(lat.status, 0.999)))
	p50 := compare(SectionStatus, "Status p50, "+with, ms(percentile(lat.status, 0.5)), "ms",
		Figure{Name: "GET /healthz p50, same daemon", Value: ms(percentile(lat.health, 0.5)), Unit: "ms"})
	rss := compare(SectionStatus, "site peak RSS, "+with, mem.peak, "MiB",
		Figure{Name: "idle site daemon, empty store", Value: idle.peak, Unit: "MiB"}).atMost(100).
		withDetail("VmHWM of the daemon process after the requests (VmRSS %.1f MiB); idle: VmHWM after %s (VmRSS %.1f MiB)",
			mem.rss, idleFor, idle.rss)
	return []Row{p99, p50, rss}
}

// statusLatencies are the timed round trips of both kinds.
type statusLatencies struct {
	status, health []time.Duration
}

// timeStatus checks that Status answers a prefilled call, warms up, then
// times n Status requests for random calls among the first calls, each
// followed by a /healthz. The ids come from a fixed seed: every run asks
// for the same ones.
func timeStatus(ctx context.Context, p *childProcess, calls, n int) (statusLatencies, error) {
	if err := checkStatus(ctx, p, callID(calls-1)); err != nil {
		return statusLatencies{}, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var lat statusLatencies
	for i := range statusWarmUp + n {
		status, err := timeGet(ctx, p, "/v1/operations/"+callID(rng.IntN(calls)))
		if err != nil {
			return statusLatencies{}, err
		}
		health, err := timeGet(ctx, p, "/healthz")
		if err != nil {
			return statusLatencies{}, err
		}
		if i >= statusWarmUp {
			lat.status, lat.health = append(lat.status, status), append(lat.health, health)
		}
	}
	return lat, nil
}

func timeGet(ctx context.Context, p *childProcess, path string) (time.Duration, error) {
	start := time.Now()
	_, err := p.get(ctx, path)
	return time.Since(start), err
}

// checkStatus makes sure Status answers with the prefilled tracking row.
func checkStatus(ctx context.Context, p *childProcess, id string) error {
	body, err := p.get(ctx, "/v1/operations/"+id)
	if err != nil {
		return fmt.Errorf("status of prefilled call %s: %w", id, err)
	}
	var row contract.TrackedOperation
	if err := json.Unmarshal(body, &row); err != nil {
		return fmt.Errorf("status of prefilled call %s: %w", id, err)
	}
	if row.OperationID != id || row.Status != contract.StatusPending {
		return fmt.Errorf("status of prefilled call %s: %+v; want it Pending", id, row)
	}
	return nil
}
