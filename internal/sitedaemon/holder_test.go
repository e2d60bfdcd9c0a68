package sitedaemon

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/workflows"
)

// Timing of the two-daemon tests: the dev server answers an idle poll
// after a second, so an idle live poller shows activity every second;
// a holder whose poller stood still for holderGrace is gone. A takeover
// may wait out one look that fails on a loaded machine (its blind time,
// up to checkTimeout, is not counted as standing still).
const (
	testLongPoll     = time.Second
	testCheckEvery   = 200 * time.Millisecond
	testHolderGrace  = 3 * time.Second
	takeoverDeadline = testHolderGrace + checkTimeout + 2*testCheckEvery + 2*time.Second
)

// An identity reads back as written; one Outpost did not write (an older
// daemon) holds the site; of two active daemons the later start yields,
// and on a tie the larger store id.
func TestDaemonIdentity(t *testing.T) {
	t.Parallel()
	started := time.Date(2025, 3, 1, 8, 0, 0, 123456789, time.UTC)
	a := daemonIdentity{site: "plant-1", node: "node-a", store: "00000000000000aa", started: started, role: roleActive}
	parsed, ok := parseIdentity(a.String())
	require.True(t, ok, a.String())
	require.Equal(t, a, parsed)
	waiting, ok := parseIdentity(a.as(roleWaiting).String())
	require.True(t, ok)
	require.Equal(t, roleWaiting, waiting.role)

	for _, raw := range []string{"outpost-site plant-1 node a run 1f2e3d4c", "12345@host", a.String() + " extra",
		strings.Replace(a.String(), "active", "leader", 1)} {
		_, ok := parseIdentity(raw)
		require.False(t, ok, raw)
		require.True(t, peerOf(raw).holds(), "%q holds the site", raw)
	}

	later := a
	later.started, later.store = started.Add(time.Millisecond), "0000000000000001"
	require.True(t, a.precedes(later))
	require.False(t, later.precedes(a))
	tie := a
	tie.store = "00000000000000bb"
	require.True(t, a.precedes(tie))
	require.False(t, tie.precedes(a))
}

// A holder's poller that stood still for grace is gone; one look that
// fails neither hides that stillness (the old rule counted every poller
// as first seen after a failed look, delaying a takeover by a whole grace)
// nor counts the blind time as stillness (the server may have let nobody
// poll then).
func TestPollerWatchExcusesOnlyTheTimeItCouldNotLook(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	holder := daemonIdentity{site: "plant-1", node: "node-a", store: "00000000000000aa", started: t0, role: roleActive}
	self := daemonIdentity{site: "plant-1", node: "node-b", store: "00000000000000bb", started: t0, role: roleWaiting}
	p := newPollerWatch(nil, self, 3*time.Second, zaptest.NewLogger(t))
	lastPoll := []*taskqueuepb.PollerInfo{{Identity: holder.String(), LastAccessTime: timestamppb.New(t0)}}
	liveAt := func(after time.Duration) bool {
		return len(p.observe(lastPoll, t0.Add(after))) == 1
	}

	require.True(t, liveAt(0), "first seen: live")
	require.True(t, liveAt(time.Second), "seen still for 1s")
	p.blind = true // a look failed: from 1s, the last good one, to 3s nothing is known
	require.True(t, liveAt(3*time.Second), "seen still for 1s, then blind for 2s")
	require.True(t, liveAt(4900*time.Millisecond), "seen still for 2.9s")
	require.False(t, liveAt(5100*time.Millisecond), "seen still for 3.1s: gone")
}

// twoDaemonSite is a Temporal dev server with a central worker running
// cached calls' workflows, and the config of a site whose "erp" answers
// 200, or failWith when set. Each daemon of it gets a store of its own.
type twoDaemonSite struct {
	t        *testing.T
	srv      *testsuite.DevServer
	cfg      Options
	failWith atomic.Int32
}

func newTwoDaemonSite(t *testing.T) *twoDaemonSite {
	s := &twoDaemonSite{t: t, srv: startDevServerWith(t, devserver.Options{LongPoll: testLongPoll})}
	s.cfg = daemonSiteConfig(t, &s.failWith)
	s.cfg.ID = "plant-1"
	s.cfg.PollerCheckInterval, s.cfg.HolderGrace = testCheckEvery, testHolderGrace
	s.cfg.ForwardInterval, s.cfg.PollInterval = 200*time.Millisecond, 50*time.Millisecond
	erp := s.cfg.ExternalSystems["erp"]
	erp.RetryInterval, erp.MaxRetries = 300*time.Millisecond, 200
	s.cfg.ExternalSystems = map[string]site.ExternalSystem{"erp": erp}

	central := worker.New(s.srv.Client(), contract.CentralTaskQueue, worker.Options{})
	central.RegisterWorkflowWithOptions(workflows.CachedCallWorkflow, workflow.RegisterOptions{Name: contract.WorkflowCachedCall})
	require.NoError(t, central.Start())
	t.Cleanup(central.Stop)
	return s
}

// options are the site's options with the store named store.
func (s *twoDaemonSite) options(store string) Options {
	cfg := s.cfg
	cfg.Store = filepath.Join(filepath.Dir(s.cfg.Store), store)
	return cfg
}

// start starts a daemon on store, its log also kept in the returned logs.
func (s *twoDaemonSite) start(store string) (*Daemon, *observer.ObservedLogs) {
	s.t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(zapcore.NewTee(zaptest.NewLogger(s.t).Core(), core))
	d, err := StartDaemon(context.Background(), s.options(store), s.srv.Client(), nil, log)
	require.NoError(s.t, err)
	return d, logs
}

// waitPolling waits until the site's task queue lists d's poller.
func (s *twoDaemonSite) waitPolling(d *Daemon) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		resp, err := s.srv.Client().DescribeTaskQueue(context.Background(), contract.SiteTaskQueue(s.cfg.ID), enums.TASK_QUEUE_TYPE_ACTIVITY)
		if err != nil {
			return false
		}
		for _, p := range resp.GetPollers() {
			if p.GetIdentity() == d.hold.identity().String() {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "%s polls", d.hold.identity())
}

// readiness is d's /readyz answer.
func readiness(d *Daemon) (int, Readiness, error) {
	resp, err := http.Get("http://" + d.Addr() + "/readyz")
	if err != nil {
		return 0, Readiness{}, err
	}
	defer resp.Body.Close()
	var rd Readiness
	err = json.NewDecoder(resp.Body).Decode(&rd)
	return resp.StatusCode, rd, err
}

// isActive reports whether /readyz says d acts for the site.
func isActive(d *Daemon) bool {
	code, rd, err := readiness(d)
	return err == nil && code == http.StatusOK && rd.Role == string(roleActive)
}

// requireWaitingFor checks every face of a daemon that waits for holder:
// /readyz, the API's writes and its SDK client refuse, naming the holder;
// GET still answers; the metrics and the log say so.
func requireWaitingFor(t *testing.T, d *Daemon, logs *observer.ObservedLogs, holder *Daemon) {
	t.Helper()
	holderID := holder.hold.identity().String()
	code, rd, err := readiness(d)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.False(t, rd.Ready)
	require.Equal(t, "ok", rd.Store)
	require.True(t, strings.HasPrefix(rd.Role, "waiting: site held by "+holderID), rd.Role)

	base := "http://" + d.Addr()
	for path, body := range map[string]string{
		"/v1/notifications": `{"list":"ops","subject":"s","body":"b"}`,
		"/v1/calls":         `{"system":"erp","method":"getOrder","params":{"id":7}}`,
	} {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		var answer ErrorBody
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
		require.Equal(t, holderID, answer.Holder, path)
		require.Contains(t, answer.Error, "held by another daemon ("+holderID+")", path)
		require.Contains(t, answer.Error, "send them to the holder, or stop it", path)
	}
	_, err = d.Client.Notify(context.Background(), "ops", "s", "b")
	var unavailable *site.UnavailableError
	require.True(t, errors.As(err, &unavailable), "the daemon's SDK client refuses too: %v", err)
	require.Equal(t, holderID, unavailable.Holder)

	resp, err := http.Get(base + "/v1/operations/343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "reads answer from its own store")

	families := testutil.ScrapeMetrics(t, base+"/metrics")
	require.Zero(t, testutil.MetricValue(families, "outpost_site_active", nil))
	require.GreaterOrEqual(t, testutil.MetricValue(families, "outpost_site_other_pollers", nil), 1.0)

	said := logs.FilterMessageSnippet("another daemon holds site plant-1").FilterField(zap.String("holder", holderID)).All()
	require.Len(t, said, 1, "the yield is logged once, naming the holder")
	require.Contains(t, said[0].Message, "give this daemon its own site.id or stop it")
}

// Two daemons with one site id: the first holds the site, the second waits
// (503 naming the first) and never takes over from a live holder. Stopped,
// the first's poller stands still and the second takes over within
// holder_grace and a couple of checks. The first, restarted, waits in turn
// and strands nothing it held: the cached call it accepted, whose retries
// the active daemon refuses, reaches it on the task queue (it polls as
// waiting while it holds the call) and is delivered; a notification left in
// its buffer is handed off.
func TestOneDaemonHoldsTheSite(t *testing.T) {
	t.Parallel()
	s := newTwoDaemonSite(t)
	first, _ := s.start("first.db")
	_, stopFirst := runDaemon(t, first)
	require.True(t, isActive(first))
	s.waitPolling(first)

	second, secondLogs := s.start("second.db")
	runDaemon(t, second)
	requireWaitingFor(t, second, secondLogs, first)
	require.Never(t, func() bool { return isActive(second) }, 2*testHolderGrace, 100*time.Millisecond,
		"an idle live holder keeps the site")
	require.Equal(t, 1.0, testutil.MetricValue(testutil.ScrapeMetrics(t, "http://"+first.Addr()+"/metrics"), "outpost_site_active", nil))

	s.failWith.Store(http.StatusServiceUnavailable)
	call, err := first.Client.Call(context.Background(), "erp", "getOrder", map[string]any{"id": 1})
	require.NoError(t, err)
	require.True(t, call.Queued())
	require.Eventually(t, func() bool {
		_, err := s.srv.Client().DescribeWorkflowExecution(context.Background(), contract.CachedCallWorkflowID(call.ID), "")
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the call is handed off")
	stopFirst()
	stoppedAt := time.Now()
	s.failWith.Store(0)

	require.Eventually(t, func() bool { return isActive(second) }, takeoverDeadline, 50*time.Millisecond,
		"the second takes over within holder_grace of the first's stop")
	t.Logf("the second took over %s after the first stopped", time.Since(stoppedAt).Round(time.Millisecond))
	s.waitPolling(second)

	left := openSite(t, s.options("first.db"))
	notification, err := left.Notify(context.Background(), "ops", "left in the buffer", "body")
	require.NoError(t, err)

	restarted, restartedLogs := s.start("first.db")
	runDaemon(t, restarted)
	requireWaitingFor(t, restarted, restartedLogs, second)
	require.Eventually(t, func() bool {
		row, err := restarted.Client.Tracking().Details(context.Background(), call.ID, nil)
		return err == nil && row.Status == contract.StatusDelivered
	}, 30*time.Second, 100*time.Millisecond, "the call the waiting daemon holds is retried on it and delivered")
	require.Eventually(t, func() bool {
		_, err := s.srv.Client().DescribeWorkflowExecution(context.Background(), contract.NotificationWorkflowID(notification), "")
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the waiting daemon hands off what its buffer holds")
	require.Eventually(t, func() bool {
		return testutil.MetricValue(testutil.ScrapeMetrics(t, "http://"+second.Addr()+"/metrics"), "outpost_site_other_pollers", nil) == 0
	}, takeoverDeadline, 100*time.Millisecond, "holding nothing unsettled, the waiting daemon stops polling")
	require.True(t, isActive(second), "a waiting daemon never takes the site from its live holder")
}

// Two daemons started at once both see nobody and both start active; once
// each sees the other's poller, the later start yields, logs who holds the
// site, and refuses work, while the earlier one keeps it.
func TestDaemonsStartedAtOnceLeaveOneActive(t *testing.T) {
	t.Parallel()
	s := newTwoDaemonSite(t)
	daemons := make([]*Daemon, 2)
	logs := make([]*observer.ObservedLogs, 2)
	var wg sync.WaitGroup
	for i, store := range []string{"a.db", "b.db"} {
		wg.Go(func() { daemons[i], logs[i] = s.start(store) })
	}
	wg.Wait()
	for _, d := range daemons {
		require.Equal(t, roleActive, d.hold.currentRole(), "neither saw the other's poller before starting")
	}
	keeper, yielder, yielderLogs := daemons[0], daemons[1], logs[1]
	if yielder.hold.identity().precedes(keeper.hold.identity()) {
		keeper, yielder, yielderLogs = yielder, keeper, logs[0]
	}

	for _, d := range daemons {
		runDaemon(t, d)
	}
	require.Eventually(t, func() bool { return !isActive(yielder) }, 10*time.Second, 50*time.Millisecond,
		"the later start yields once it sees the other")
	requireWaitingFor(t, yielder, yielderLogs, keeper)
	require.Never(t, func() bool { return !isActive(keeper) || isActive(yielder) }, 2*testHolderGrace, 100*time.Millisecond,
		"exactly one stays active")
}
