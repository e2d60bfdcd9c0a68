package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/logging"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
)

// replicationSecretEnv holds the secret of the section's pairs.
const replicationSecretEnv = "OUTPOST_BENCH_PAIR_SECRET"

// replication offers Rate enqueues per second for LatencyDuration, open
// loop as in the latency section, through the SDK client of a site
// daemon's active node: alone (no replication), then in a pair with async
// replication, then with sync, then alone again. Central is unreachable throughout, so the
// three runs do the same work but the standby's. The async pair's
// replication lag is each change's time from commit on the active node to
// applied on the standby (both in this process: one clock).
func (r *run) replication(ctx context.Context) ([]Row, error) {
	if err := os.Setenv(replicationSecretEnv, "bench"); err != nil {
		return nil, err
	}
	var res [4]openLoopResult
	var lags []time.Duration
	for i, mode := range []string{"none", config.ReplicationAsync, config.ReplicationSync, "none"} {
		r.step("replication: SDK Notify on the active node, %s replication, %s/s offered for %s", mode, thousands(int64(r.opts.Rate)), r.opts.LatencyDuration)
		var err error
		if res[i], lags, err = r.replicatedLoad(ctx, mode, lags); err != nil {
			return nil, fmt.Errorf("replication %s: %w", mode, err)
		}
	}
	// The baseline runs first and last; the better of the two counts, so
	// the machine's noise never flatters the pair.
	if len(lags) == 0 {
		return nil, fmt.Errorf("replication: the standby applied no change during the async run")
	}
	if percentile(res[3].latencies, 0.99) < percentile(res[0].latencies, 0.99) {
		res[0] = res[3]
	}
	return replicationRows(r.opts.Rate, [3]openLoopResult(res[:3]), lags), nil
}

func replicationRows(rate int, res [3]openLoopResult, lags []time.Duration) []Row {
	at := thousands(int64(rate)) + "/s offered"
	achieved := func(r openLoopResult) float64 { return perSecond(len(r.latencies), r.took) }
	alone := Figure{Name: "no replication", Value: achieved(res[0]), Unit: "/s"}
	async := compare(SectionReplication, "enqueue throughput, async replication, "+at, achieved(res[1]), "/s", alone).atLeastRatio(0.9)
	syncP99 := compare(SectionReplication, "enqueue p99, sync replication, "+at, ms(percentile(res[2].latencies, 0.99)), "ms",
		Figure{Name: "no replication p99", Value: ms(percentile(res[0].latencies, 0.99)), Unit: "ms"}).atMostRatio(3)
	syncP99 = syncP99.withDetail("p50 %.2f ms (no replication %.2f ms); async p99 %.2f ms; sync achieved %s",
		ms(percentile(res[2].latencies, 0.5)), ms(percentile(res[0].latencies, 0.5)), ms(percentile(res[1].latencies, 0.99)),
		formatValue(achieved(res[2]), "/s"))
	lag := compare(SectionReplication, "replication lag p99, async, "+at, ms(percentile(lags, 0.99)), "ms",
		Figure{Name: "enqueue p99, no replication", Value: ms(percentile(res[0].latencies, 0.99)), Unit: "ms"}).atMost(100)
	lag = lag.withDetail("%s changes (commits) applied; p50 %.2f ms, max %.1f ms", thousands(int64(len(lags))),
		ms(percentile(lags, 0.5)), ms(slices.Max(lags)))
	return []Row{async, syncP99, lag}
}

// replicatedLoad runs the open loop on a fresh site of the given mode
// ("none" for one daemon alone) and, for async, returns the standby's
// apply lags of the run (else lags as given).
func (r *run) replicatedLoad(ctx context.Context, mode string, lags []time.Duration) (openLoopResult, []time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	daemons, err := r.startReplicatedSite(ctx, mode)
	if err != nil {
		return openLoopResult{}, nil, err
	}
	active := daemons[0]
	body := r.body()
	notify := func(ctx context.Context) error {
		_, err := active.Client.Notify(ctx, benchList, benchSubject, body)
		return err
	}
	if err := notify(ctx); err != nil {
		return openLoopResult{}, nil, err
	}
	before := 0
	if mode == config.ReplicationAsync {
		before = len(daemons[1].ApplyLags())
	}
	res, err := openLoop(ctx, r.opts.Rate, r.opts.LatencyDuration, notify)
	if err != nil || mode != config.ReplicationAsync {
		return res, lags, err
	}
	if err := waitCaughtUp(ctx, daemons); err != nil {
		return res, lags, err
	}
	applied := daemons[1].ApplyLags()
	if before > len(applied) { // the standby keeps its latest lags only
		before = 0
	}
	return res, applied[before:], nil
}

// waitCaughtUp waits until the standby applied every change of the active.
func waitCaughtUp(ctx context.Context, daemons []*sitedaemon.Daemon) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if st, _ := daemons[0].PairStatus(ctx); st.LagChanges == 0 {
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return err
		}
	}
	return fmt.Errorf("the standby did not catch up within 30 s of the load")
}

// startReplicatedSite starts the site's daemons, runs them until ctx
// ends, and returns them, the one that takes operations first, once the
// pair settled.
func (r *run) startReplicatedSite(ctx context.Context, mode string) ([]*sitedaemon.Daemon, error) {
	temporalAddr, err := freeAddr() // nothing listens: central unreachable
	if err != nil {
		return nil, err
	}
	tc, err := client.NewLazyClient(client.Options{HostPort: temporalAddr, Logger: logging.NewTemporal(r.log)})
	if err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, tc.Close)
	nodes := 1
	if mode != "none" {
		nodes = 2
	}
	listens := make([]string, nodes)
	for i := range listens {
		if listens[i], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	daemons := make([]*sitedaemon.Daemon, nodes)
	for i := range daemons {
		cfg := config.Default().Site
		cfg.ID, cfg.Node = "bench-pair", fmt.Sprintf("node-%d", i)
		cfg.Store, cfg.Listen = r.path(fmt.Sprintf("replication-%s-%d.db", mode, i)), listens[i]
		if nodes == 2 {
			cfg.Peer = config.Peer{Address: "http://" + listens[1-i], SecretEnv: replicationSecretEnv, Prefer: i == 0}
			cfg.Replication = mode
		}
		d, err := sitedaemon.StartDaemon(ctx, fromconfig.SiteDaemon(cfg), tc, nil, r.log.Named(cfg.Node))
		if err != nil {
			return nil, err
		}
		go func() { _ = d.Run(ctx) }()
		daemons[i] = d
	}
	return daemons, waitPairSettled(ctx, daemons)
}

// waitPairSettled waits, in a pair, until the first daemon is active and
// the second follows it. A daemon alone is active once started (central is
// unreachable: it asks nobody).
func waitPairSettled(ctx context.Context, daemons []*sitedaemon.Daemon) error {
	if len(daemons) == 1 {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		first, _ := daemons[0].PairStatus(ctx)
		second, _ := daemons[1].PairStatus(ctx)
		if first.Self.Role == "active" && second.Following {
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(20*time.Millisecond)); err != nil {
			return err
		}
	}
	return fmt.Errorf("the site's daemons did not settle (active, and the standby following) within 30 s")
}
