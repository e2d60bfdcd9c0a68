package sitedaemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// testFailoverAfter is the pair tests' site.failover_after.
const testFailoverAfter = time.Second

// testPair is two daemons of one site, each reaching the other through a
// proxy the test can cut.
type testPair struct {
	site       *twoDaemonSite
	opts       [2]Options
	nodes      [2]*Daemon
	stop       [2]func()
	toNode     [2]*testutil.Proxy // toNode[i] is how the other node reaches node i
	secretName string
}

var pairSecrets atomic.Int32

func newTestPair(t *testing.T, sync bool) *testPair {
	t.Helper()
	p := &testPair{site: newTwoDaemonSite(t)}
	// t.Setenv cannot be used in a parallel test: each pair has its own variable.
	p.secretName = fmt.Sprintf("OUTPOST_TEST_PAIR_SECRET_%d", pairSecrets.Add(1))
	require.NoError(t, os.Setenv(p.secretName, "pair-secret"))
	t.Cleanup(func() { os.Unsetenv(p.secretName) })
	for i := range 2 {
		p.toNode[i] = testutil.NewProxy(t)
	}
	for i, node := range []string{"node-a", "node-b"} {
		opts := p.site.options(node + ".db")
		opts.Node = node
		opts.Peer = PeerOptions{Address: "http://" + p.toNode[1-i].Addr(), SecretEnv: p.secretName,
			Prefer: i == 0, Sync: sync, FailoverAfter: testFailoverAfter}
		p.opts[i] = opts
		p.start(t, i)
	}
	return p
}

// start starts node i on its store and lets the other node reach it.
func (p *testPair) start(t *testing.T, i int) {
	t.Helper()
	d, err := StartDaemon(context.Background(), p.opts[i], p.site.srv.Client(), nil, zaptest.NewLogger(t).Named(p.opts[i].Node))
	require.NoError(t, err)
	p.nodes[i] = d
	p.toNode[i].SetTarget(d.Addr())
	_, p.stop[i] = runDaemon(t, d)
}

// role is node i's role as /readyz says it.
func (p *testPair) role(i int) string {
	_, rd, err := readiness(p.nodes[i])
	if err != nil {
		return "unreachable"
	}
	return strings.SplitN(rd.Role, ":", 2)[0]
}

// requireRoles waits until node 0 and node 1 are in the roles given.
func (p *testPair) requireRoles(t *testing.T, within time.Duration, a, b string) {
	t.Helper()
	require.Eventually(t, func() bool { return p.role(0) == a && p.role(1) == b },
		within, 20*time.Millisecond, "want node-a %s and node-b %s", a, b)
}

// requireCaughtUp waits until node i's copy stands at node j's position.
func (p *testPair) requireCaughtUp(t *testing.T, i, j int) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		a, err1 := p.nodes[i].store.Position(ctx)
		b, err2 := p.nodes[j].store.Position(ctx)
		return err1 == nil && err2 == nil && a.Number == b.Number && string(a.Checksum) == string(b.Checksum)
	}, 10*time.Second, 20*time.Millisecond)
}

// The preferred node becomes active, the other standby; the standby
// follows every change, refuses operations naming the active node, and
// takes over when the active node stops, within failover_after.
func TestPairStandbyFollowsAndTakesOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestPair(t, false)
	p.requireRoles(t, 5*time.Second, "active", "standby")

	var ids []string
	for i := range 20 {
		id, err := p.nodes[0].Client.Notify(ctx, "ops", fmt.Sprintf("n-%d", i), "body")
		require.NoError(t, err)
		ids = append(ids, id)
	}
	p.site.failWith.Store(http.StatusServiceUnavailable)
	call, err := p.nodes[0].Client.Call(ctx, "erp", "getOrder", map[string]any{"id": 1})
	require.NoError(t, err)
	p.requireCaughtUp(t, 1, 0)
	row, err := p.nodes[1].store.GetOperation(ctx, call.ID)
	require.NoError(t, err, "the standby's copy has the call")
	require.Equal(t, contract.StatusPending, row.Status)

	resp, err := http.Post("http://"+p.nodes[1].Addr()+"/v1/notifications", "application/json",
		strings.NewReader(`{"list":"ops","subject":"s","body":"b"}`))
	require.NoError(t, err)
	var refused ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&refused))
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Equal(t, p.opts[1].Peer.Address, refused.Holder, "the standby names the active node")
	require.Contains(t, refused.Error, "standby")

	status := pairStatus(t, p.nodes[1])
	require.Equal(t, pairStandby, status.Self.Role)
	require.Equal(t, pairActive, status.Peer.Role)

	stoppedAt := time.Now()
	p.stop[0]()
	require.Eventually(t, func() bool { return p.role(1) == "active" }, testFailoverAfter+2*time.Second, 20*time.Millisecond)
	t.Logf("standby took over %s after the active node stopped", time.Since(stoppedAt).Round(time.Millisecond))
	families := testutil.ScrapeMetrics(t, "http://"+p.nodes[1].Addr()+"/metrics")
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_active", nil))
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_failovers_total", nil))
	require.Equal(t, 2.0, testutil.MetricValue(families, "outpost_site_epoch", nil))

	// The new active node drives the call it got by replication.
	p.site.failWith.Store(0)
	require.Eventually(t, func() bool {
		row, err := p.nodes[1].store.GetOperation(ctx, call.ID)
		return err == nil && row.Status == contract.StatusDelivered
	}, 30*time.Second, 100*time.Millisecond)
	_, err = p.nodes[1].Client.Notify(ctx, "ops", "after failover", "body")
	require.NoError(t, err)

	// The old active node comes back as standby and follows again.
	p.start(t, 0)
	p.requireRoles(t, 5*time.Second, "standby", "active")
	p.requireCaughtUp(t, 0, 1)
}

// A partition makes both nodes active; each takes operations. Healed, the
// lower epoch steps down, hands over what the other lacks, and takes a full
// copy: exactly one node is active and it holds every accepted call.
func TestPairPartitionHealsToOneActiveWithEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestPair(t, false)
	p.requireRoles(t, 5*time.Second, "active", "standby")
	p.site.failWith.Store(http.StatusServiceUnavailable) // calls stay Retrying: each is in its node's buffer

	p.toNode[0].Cut()
	p.toNode[1].Cut()
	p.requireRoles(t, testFailoverAfter+2*time.Second, "active", "active")
	var calls []string
	for i := range 2 {
		for range 3 {
			call, err := p.nodes[i].Client.Call(ctx, "erp", "getOrder", map[string]any{"id": i})
			require.NoError(t, err)
			calls = append(calls, call.ID)
		}
	}
	p.toNode[0].Heal()
	p.toNode[1].Heal()
	// The lower epoch steps down; when neither node heard of the other's
	// epoch before the cut, both hold the same one and the preferred node
	// stays. Either way exactly one stays active.
	var active, standby int
	require.Eventually(t, func() bool {
		roles := [2]string{p.role(0), p.role(1)}
		switch roles {
		case [2]string{"active", "standby"}:
			active, standby = 0, 1
		case [2]string{"standby", "active"}:
			active, standby = 1, 0
		default:
			return false
		}
		return true
	}, 5*time.Second, 20*time.Millisecond, "exactly one node is active after healing")
	p.requireCaughtUp(t, standby, active)
	for _, id := range calls {
		row, err := p.nodes[active].store.GetOperation(ctx, id)
		require.NoError(t, err, "the active node holds call %s", id)
		require.NotEqual(t, contract.StatusDelivered, row.Status)
	}
	families := testutil.ScrapeMetrics(t, "http://"+p.nodes[standby].Addr()+"/metrics")
	require.Equal(t, 3.0, testutil.MetricValue(families, "outpost_site_handed_over_operations_total", nil),
		"the stepped-down node handed over the three calls it took")
	// The resync is counted once its copy is in place, a moment after the
	// copy makes the two stores' positions equal (requireCaughtUp).
	require.Eventually(t, func() bool {
		families := testutil.ScrapeMetrics(t, "http://"+p.nodes[standby].Addr()+"/metrics")
		return testutil.MetricValue(families, "outpost_site_resyncs_total", nil) >= 1
	}, 5*time.Second, 20*time.Millisecond, "the stepped-down node counts its full resync")

	p.site.failWith.Store(0)
	require.Eventually(t, func() bool {
		for _, id := range calls {
			row, err := p.nodes[active].store.GetOperation(ctx, id)
			if err != nil || row.Status != contract.StatusDelivered {
				return false
			}
		}
		return true
	}, 60*time.Second, 200*time.Millisecond, "the active node delivers every call, its own and those handed over")
}

// In sync mode an enqueue is answered only once the standby has it.
func TestPairSyncEnqueueIsOnTheStandbyWhenAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestPair(t, true)
	p.requireRoles(t, 5*time.Second, "active", "standby")
	p.requireCaughtUp(t, 1, 0)
	metrics := "http://" + p.nodes[0].Addr() + "/metrics"
	unsynced := func() float64 {
		return testutil.MetricValue(testutil.ScrapeMetrics(t, metrics), "outpost_site_replication_unsynced_writes_total", nil)
	}
	before := unsynced() // writes made before the standby followed were answered without it
	for i := range 20 {
		id, err := p.nodes[0].Client.Notify(ctx, "ops", fmt.Sprintf("n-%d", i), "body")
		require.NoError(t, err)
		_, err = p.nodes[1].store.JobExportState(ctx, id)
		require.NoError(t, err, "notification %d is on the standby when its enqueue returns", i)
	}
	require.Equal(t, before, unsynced(), "every write waited for the standby")
}

func pairStatus(t *testing.T, d *Daemon) PairStatus {
	t.Helper()
	resp, err := http.Get("http://" + d.Addr() + "/v1/pair")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var s PairStatus
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&s))
	return s
}

// The answers queued behind the one taken go into the same apply, in
// order, awaited when any of them is.
func TestWithQueuedMergesQueuedAnswers(t *testing.T) {
	answers := make(chan pulled, 2)
	answers <- pulled{changes: []sitestore.Change{{Number: 2}}, awaited: true}
	answers <- pulled{changes: []sitestore.Change{{Number: 3}, {Number: 4}}}
	merged := withQueued(pulled{changes: []sitestore.Change{{Number: 1}}}, answers)
	var numbers []int64
	for _, c := range merged.changes {
		numbers = append(numbers, c.Number)
	}
	require.Equal(t, []int64{1, 2, 3, 4}, numbers)
	require.True(t, merged.awaited, "an awaited answer among them makes the apply awaited")
	require.Empty(t, answers, "every queued answer was taken")

	close(answers)
	alone := withQueued(pulled{changes: []sitestore.Change{{Number: 5}}}, answers)
	require.Len(t, alone.changes, 1, "a closed queue adds nothing")
}
