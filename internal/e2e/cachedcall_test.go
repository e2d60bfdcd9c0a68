package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/activities/heartbeat"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/demosystem"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/workflows"
)

// A target that fails N times then recovers: Pending → Retrying →
// Delivered, N+1 attempts at the configured interval, on the site and in
// site_calls.
func TestCachedCallRecoversAfterFailures(t *testing.T) {
	// 3 s: gaps of the site's forward interval (1 s), of Temporal's default
	// retry policy (1 s, 2 s, …) or of the other tests' 2 s fall outside
	// requireGap's window.
	s := newStack(t, func(c *config.Config) {
		erp := c.Site.ExternalSystems["erp"]
		erp.RetryInterval = 3 * time.Second
		c.Site.ExternalSystems["erp"] = erp
	})
	const failures = 3
	s.demo.FailNext(failures, http.StatusServiceUnavailable)

	res, code := s.call("erp", "createOrder", map[string]any{"sku": "P-100", "qty": 2})
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, contract.StatusPending, res.Status)
	require.Contains(t, res.Error, "503")

	s.waitOperation(res.ID, contract.StatusRetrying, 30*time.Second)
	s.waitMirror(res.ID, contract.StatusRetrying)
	row := s.waitOperation(res.ID, contract.StatusDelivered, 30*time.Second)
	require.Equal(t, failures, row.RetryCount)
	wid := contract.CachedCallWorkflowID(res.ID)
	s.recordHistory(wid, "cachedcall_recovers.json")
	s.waitMirror(res.ID, contract.StatusDelivered)
	s.recordHistory(contract.TelemetryIngestWorkflowID(s.cfg.Site.ID), "telemetry_ingest.json")
	requireStartedWithInput(t, s.client, wid, contract.WorkflowCachedCallStarted, s.history(wid))
	requireHeartbeatTimeouts(t, s.history(wid), failures)

	attempts := s.demo.Requests()
	require.Len(t, attempts, failures+1, "one immediate attempt and %d retries", failures)
	interval := s.cfg.Site.ExternalSystems["erp"].RetryInterval
	for i := 1; i < len(attempts); i++ {
		gap := attempts[i].At.Sub(attempts[i-1].At)
		t.Logf("gap before attempt %d: %s", i+1, gap)
		requireGap(t, interval, gap, "gap before attempt %d", i+1)
		require.JSONEq(t, `{"sku":"P-100","qty":2}`, string(attempts[i].Body), "every retry sends the same request")
	}
	mirrored := s.waitMirror(res.ID, contract.StatusDelivered)
	require.Equal(t, failures, mirrored.RetryCount)
	require.Equal(t, "erp.createOrder", mirrored.Target)
	require.Equal(t, contract.KindExternalCall, mirrored.Kind)
}

// A target that never recovers parks the call; retry after it is fixed
// delivers, discard ends Discarded, on the site and at central.
func TestCachedCallParksThenRetryOrDiscard(t *testing.T) {
	s := newStack(t, nil)
	s.demo.FailNext(-1, http.StatusBadGateway)
	toRetry, code := s.call("erp", "createOrder", map[string]any{"sku": "retry-me"})
	require.Equal(t, http.StatusAccepted, code)
	toDiscard, code := s.call("erp", "createOrder", map[string]any{"sku": "discard-me"})
	require.Equal(t, http.StatusAccepted, code)

	maxRetries := s.cfg.Site.ExternalSystems["erp"].MaxRetries
	for _, id := range []string{toRetry.ID, toDiscard.ID} {
		row := s.waitOperation(id, contract.StatusParked, time.Minute)
		require.Equal(t, maxRetries, row.RetryCount)
		require.Contains(t, row.LastError, fmt.Sprintf("retries exhausted (%d)", maxRetries))
		s.waitMirror(id, contract.StatusParked)
	}
	require.Equal(t, map[string]int{"retry-me": 1 + maxRetries, "discard-me": 1 + maxRetries}, s.requestsBySKU(),
		"each call: the immediate attempt and max_retries retries, then nothing while parked")

	s.demo.Recover()
	s.signalCall(toRetry.ID, contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "ERP is back"})
	s.waitOperation(toRetry.ID, contract.StatusDelivered, 30*time.Second)
	s.waitMirror(toRetry.ID, contract.StatusDelivered)

	s.signalCall(toDiscard.ID, contract.SignalDiscard, contract.OperatorAction{Operator: "ana"})
	s.waitOperation(toDiscard.ID, contract.StatusDiscarded, 30*time.Second)
	s.waitMirror(toDiscard.ID, contract.StatusDiscarded)
	s.recordHistory(contract.CachedCallWorkflowID(toRetry.ID), "cachedcall_parked_retried.json")
	s.recordHistory(contract.CachedCallWorkflowID(toDiscard.ID), "cachedcall_parked_discarded.json")
	require.Zero(t, s.bufferDepth(), "delivered and discarded calls leave the buffer")
	delivered := 0
	for _, r := range s.demo.Requests() {
		if r.Status == http.StatusOK {
			delivered++
			require.JSONEq(t, `{"sku":"retry-me"}`, string(r.Body))
		}
	}
	require.Equal(t, 1, delivered, "only the retried call reached the recovered target")
	require.Equal(t, map[string]int{"retry-me": 1 + maxRetries + 1, "discard-me": 1 + maxRetries}, s.requestsBySKU(),
		"the operator's retry made one more request, the discard none")
}

// requestsBySKU counts the demo system's requests per body "sku".
func (s *stack) requestsBySKU() map[string]int {
	s.t.Helper()
	counts := map[string]int{}
	for _, r := range s.demo.Requests() {
		var body struct{ SKU string }
		require.NoError(s.t, json.Unmarshal(r.Body, &body))
		counts[body.SKU]++
	}
	return counts
}

// HTTP 400 from the target: the caller gets the error at once, the row is
// Failed, nothing is buffered and no workflow starts.
func TestCachedCallPermanentFailureReturnsAtOnce(t *testing.T) {
	s := newStack(t, nil)
	s.demo.FailNext(1, http.StatusBadRequest)
	res, code := s.call("erp", "createOrder", map[string]any{"sku": ""})
	require.Equal(t, http.StatusBadGateway, code)
	require.Equal(t, contract.StatusFailed, res.Status)
	require.Equal(t, http.StatusBadRequest, res.HTTPStatus)
	require.Contains(t, res.Error, "HTTP 400")

	row, code := s.operation(res.ID)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, contract.StatusFailed, row.Status)
	require.NotNil(t, row.TerminalAt)
	require.Zero(t, s.bufferDepth())
	s.waitMirror(res.ID, contract.StatusFailed)
	_, err := s.client.DescribeWorkflowExecution(context.Background(), contract.CachedCallWorkflowID(res.ID), "")
	var notFound *serviceerror.NotFound
	require.ErrorAs(t, err, &notFound, "a permanent failure never reaches a workflow")
}

// Cached writes to SQLite: a locked or missing database file is retried and
// the row lands exactly once; a syntax error fails at once.
func TestCachedWritesToSQLite(t *testing.T) {
	s := newStack(t, nil)
	historian := s.cfg.Site.Databases["historian"].DSN
	createReadings(t, historian)

	lock := lockDatabase(t, historian)
	locked, code := s.write("historian", `INSERT INTO readings (tag, value) VALUES (?, ?)`, "pump-3.pressure", 4.2)
	require.Equal(t, http.StatusAccepted, code, "a locked database is a transient failure")
	require.Contains(t, locked.Error, "locked")

	archive := s.cfg.Site.Databases["archive"].DSN
	missing, code := s.write("archive", `INSERT INTO readings (tag, value) VALUES (?, ?)`, "pump-3.flow", 17)
	require.Equal(t, http.StatusAccepted, code, "a missing database file is a transient failure")
	_, err := os.Stat(archive)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed attempt never creates the database")

	// A retry from the workflow fails the same way before the target is fixed.
	for _, id := range []string{locked.ID, missing.ID} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			row, _ := s.operation(id)
			assert.Equal(c, contract.StatusRetrying, row.Status)
			assert.GreaterOrEqual(c, row.RetryCount, 1)
		}, 30*time.Second, 100*time.Millisecond, "waiting for a failed retry of %s", id)
	}
	_, err = os.Stat(archive)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed retry never creates the database")
	lock()
	createReadings(t, archive)

	for _, id := range []string{locked.ID, missing.ID} {
		row := s.waitOperation(id, contract.StatusDelivered, 30*time.Second)
		require.GreaterOrEqual(t, row.RetryCount, 2, "landed on a retry after a failed one")
	}
	require.Equal(t, []reading{{"pump-3.pressure", 4.2}}, readReadings(t, historian), "landed exactly once")
	require.Equal(t, []reading{{"pump-3.flow", 17}}, readReadings(t, archive), "landed exactly once")

	bad, code := s.write("historian", `INSERT INTO readings (tag, value) VALUSE (?, ?)`, "x", 1)
	require.Equal(t, http.StatusBadGateway, code)
	require.Equal(t, contract.StatusFailed, bad.Status)
	require.Contains(t, bad.Error, "syntax error")
	require.Zero(t, s.bufferDepth())
}

// Central (Temporal) stopped: calls still get their immediate attempt and
// are answered locally, transient failures stay buffered; when central is
// back everything converges, and after reconciliation the mirror equals
// the site's tracking table.
func TestCentralDownCallsConvergeAndMirrorMatchesAfterReconcile(t *testing.T) {
	s := newStack(t, nil)
	s.stopTemporal()

	ok, code := s.call("erp", "getOrder", map[string]any{"id": "42"})
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, contract.StatusDelivered, ok.Status)
	s.demo.FailNext(1, http.StatusNotFound)
	failed, code := s.call("erp", "getOrder", map[string]any{"id": "missing"})
	require.Equal(t, http.StatusBadGateway, code)
	s.demo.FailNext(-1, http.StatusServiceUnavailable)
	var queued []string
	for i := 0; i < 3; i++ {
		res, code := s.call("erp", "createOrder", map[string]any{"n": i})
		require.Equal(t, http.StatusAccepted, code)
		queued = append(queued, res.ID)
	}
	for id, want := range map[string]contract.Status{ok.ID: contract.StatusDelivered, failed.ID: contract.StatusFailed, queued[0]: contract.StatusPending} {
		row, code := s.operation(id)
		require.Equal(t, http.StatusOK, code, "answered on the site with central down")
		require.Equal(t, want, row.Status)
	}
	require.Equal(t, len(queued), s.bufferDepth(), "transient failures stay buffered")

	s.demo.Recover()
	s.startTemporal()
	for _, id := range queued {
		s.waitOperation(id, contract.StatusDelivered, time.Minute)
		s.waitMirror(id, contract.StatusDelivered)
	}
	s.waitMirror(ok.ID, contract.StatusDelivered)
	s.waitMirror(failed.ID, contract.StatusFailed)

	// The site created its reconciliation schedule once central was back.
	require.Eventually(t, func() bool {
		desc, err := s.client.ScheduleClient().GetHandle(context.Background(), contract.ReconcileScheduleID(s.cfg.Site.ID)).Describe(context.Background())
		return err == nil && len(desc.Schedule.Spec.Intervals) == 1 && desc.Schedule.Spec.Intervals[0].Every == s.cfg.Site.ReconcileInterval
	}, 30*time.Second, 200*time.Millisecond, "schedule %s", contract.ReconcileScheduleID(s.cfg.Site.ID))

	// Lose a mirrored row, as a central restore from an older backup would;
	// reconciliation brings it back.
	s.forgetMirroredRow(ok.ID)
	s.reconcile()
	siteRows, err := s.daemon.Client.Tracking().List(context.Background())
	require.NoError(t, err)
	mirror, err := s.centralStore().ListSiteCalls(context.Background(), s.cfg.Site.ID)
	require.NoError(t, err)
	require.Len(t, siteRows, 5)
	require.Equal(t, siteRows, mirror, "site_calls mirrors the site's tracking rows exactly")
}

// 10,000 immediate successes reach site_calls in about one telemetry round
// trip per telemetry_batch rows. telemetry_delay is long (10 s), so the rows
// travel on the "a full batch waits" trigger: were it broken, the first
// batch would wait the delay and the rest would trickle one batch a delay.
func TestTelemetryBatchesTenThousandCalls(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Site.TelemetryDelay = 10 * time.Second })
	batch, delay := s.cfg.Site.TelemetryBatch, s.cfg.Site.TelemetryDelay
	const n, callers = 10000, 8
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < callers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += callers {
				res, err := s.daemon.Client.Call(context.Background(), "erp", "getOrder", map[string]any{"id": i})
				if err == nil && res.Status != contract.StatusDelivered {
					err = fmt.Errorf("call %d: %s: %s", i, res.Status, res.Error)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// The first batch goes once telemetry_batch changes wait, long before
	// the delay.
	for s.daemon.Telemetry.Batches() == 0 && time.Since(start) < delay {
		time.Sleep(10 * time.Millisecond)
	}
	firstBatch := time.Since(start)
	wg.Wait()
	burst := time.Since(start)
	close(errs)
	require.NoError(t, <-errs)
	require.Less(t, firstBatch, delay/2, "a full batch goes at once, not after telemetry_delay")

	// Central persists a batch before the site hears so, moves its cursor
	// and then counts the batch: the rows in site_calls do not mean the
	// last batch is counted yet (a run saw 19 of 20). Wait until the site's
	// backlog was empty on two polls in a row, 200 ms apart, so its sender
	// had time to count the batch that emptied it.
	store := s.centralStore()
	mirrored, backlog, emptyBefore := 0, -1.0, false
	testutil.WaitFor(t, 2*time.Minute, func() bool {
		rows, err := store.ListSiteCalls(context.Background(), s.cfg.Site.ID)
		require.NoError(t, err)
		mirrored = len(rows)
		wasEmpty := emptyBefore
		backlog = testutil.MetricValue(testutil.ScrapeMetrics(t, s.siteURL+"/metrics"), "outpost_site_telemetry_backlog", nil)
		emptyBefore = backlog == 0
		return mirrored == n && emptyBefore && wasEmpty
	}, func() string {
		return fmt.Sprintf("all %d rows in site_calls (%d there) and the site's telemetry backlog empty (%v)", n, mirrored, backlog)
	})
	elapsed := time.Since(start)
	rows, err := store.ListSiteCalls(context.Background(), s.cfg.Site.ID)
	require.NoError(t, err)
	for _, row := range rows {
		require.Equal(t, contract.StatusDelivered, row.Status)
	}
	batches, attempts := s.daemon.Telemetry.Batches(), s.daemon.Telemetry.Attempts()
	// Full batches at once, a partial one at most once per telemetry_delay.
	// Every change travels: each call is two, begun (Pending) and its
	// immediate attempt's outcome (Delivered).
	changes := 2 * n
	limit := int64(ceilDiv(changes, batch) + ceilDiv(int(elapsed), int(delay)) + 2)
	t.Logf("%d immediate successes in %s reached site_calls in %s: %d telemetry round trips (%d sends), at most %d allowed; first batch persisted after %s",
		n, burst.Round(time.Millisecond), elapsed.Round(time.Millisecond), batches, attempts, limit, firstBatch.Round(time.Millisecond))
	require.LessOrEqual(t, batches, limit, "telemetry is batched")
	require.GreaterOrEqual(t, batches, int64(changes/batch), "no batch exceeds telemetry_batch changes")

	// Central's workers are of this code's generation: the batches went as
	// signals to the site's ingest workflow (its latest run: a run holding
	// about 4 MB of batches continues as new).
	wid := contract.TelemetryIngestWorkflowID(s.cfg.Site.ID)
	signals := 0
	for _, ev := range s.history(wid) {
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			signals++
		}
	}
	require.Positive(t, signals, "telemetry batches signalled to %s", wid)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

type reading struct {
	Tag   string
	Value float64
}

func createReadings(t *testing.T, path string) {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE readings (tag TEXT NOT NULL, value REAL NOT NULL)`)
	require.NoError(t, err)
}

func readReadings(t *testing.T, path string) []reading {
	t.Helper()
	db, err := sqlitedb.Open(context.Background(), path)
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT tag, value FROM readings ORDER BY rowid`)
	require.NoError(t, err)
	defer rows.Close()
	var out []reading
	for rows.Next() {
		var r reading
		require.NoError(t, rows.Scan(&r.Tag, &r.Value))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// lockDatabase holds an exclusive lock on the SQLite file until the
// returned function is called.
func lockDatabase(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`)
	require.NoError(t, err)
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		_, err := conn.ExecContext(context.Background(), `ROLLBACK`)
		require.NoError(t, err)
		conn.Close()
		db.Close()
	}
	t.Cleanup(release)
	return release
}

// call posts a cached call to the stack's site API.
func (s *stack) call(system, method string, params map[string]any) (site.CallResult, int) {
	s.t.Helper()
	return s.firstSite().call(system, method, params)
}

// write posts a cached write to the stack's site API.
func (s *stack) write(connection, sql string, args ...any) (site.CallResult, int) {
	s.t.Helper()
	var res site.CallResult
	code := s.firstSite().post("/v1/writes", site.WriteRequest{Connection: connection, SQL: sql, Args: args, Script: "e2e"}, &res)
	return res, code
}

// operation reads a tracking row through the stack's site API.
func (s *stack) operation(id string) (contract.TrackedOperation, int) {
	s.t.Helper()
	return s.firstSite().operation(id)
}

// waitOperation waits until the site reports want for id and returns the row.
func (s *stack) waitOperation(id string, want contract.Status, timeout time.Duration) contract.TrackedOperation {
	s.t.Helper()
	var row contract.TrackedOperation
	testutil.WaitFor(s.t, timeout, func() bool {
		row, _ = s.operation(id)
		return row.Status == want
	}, func() string {
		return fmt.Sprintf("operation %s to be %s (last seen %s, %d retries: %s)", id, want, row.Status, row.RetryCount, row.LastError)
	})
	return row
}

// waitMirror waits until central's site_calls shows want for id. The wait
// covers a telemetry batch caught by a Temporal restart: its ingest run may
// only give way to a resend after its one-minute execution timeout.
func (s *stack) waitMirror(id string, want contract.Status) contract.TrackedOperation {
	s.t.Helper()
	store := s.centralStore()
	var row contract.TrackedOperation
	require.Eventually(s.t, func() bool {
		var err error
		row, err = store.GetSiteCall(context.Background(), id)
		return err == nil && row.Status == want
	}, 90*time.Second, 100*time.Millisecond, "waiting for site_calls row %s to be %s (last seen %q)", id, want, row.Status)
	return row
}

func (s *stack) signalCall(id, name string, action contract.OperatorAction) {
	s.t.Helper()
	require.NoError(s.t, s.client.SignalWorkflow(context.Background(), contract.CachedCallWorkflowID(id), "", name, action))
}

func (s *stack) bufferDepth() int {
	s.t.Helper()
	n, err := s.daemon.Client.BufferDepth(context.Background())
	require.NoError(s.t, err)
	return n
}

// reconcile runs one reconciliation of the site and waits for it.
func (s *stack) reconcile() contract.ReconcileResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run, err := s.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: "reconcile-now/" + s.cfg.Site.ID, TaskQueue: contract.CentralTaskQueue,
	}, workflows.ReconcileSiteWorkflow, contract.ReconcileInput{SiteID: s.cfg.Site.ID})
	require.NoError(s.t, err)
	var res contract.ReconcileResult
	require.NoError(s.t, run.Get(ctx, &res))
	return res
}

// forgetMirroredRow deletes a row from central's site_calls and resets the
// site's reconciliation cursor, as restoring an older backup would.
func (s *stack) forgetMirroredRow(id string) {
	s.t.Helper()
	db, err := sqlitedb.Open(context.Background(), s.cfg.Central.Store.Path)
	require.NoError(s.t, err)
	defer db.Close()
	res, err := db.Exec(`DELETE FROM site_calls WHERE operation_id = ?`, id)
	require.NoError(s.t, err)
	n, err := res.RowsAffected()
	require.NoError(s.t, err)
	require.EqualValues(s.t, 1, n)
	_, err = db.Exec(`DELETE FROM site_cursors`)
	require.NoError(s.t, err)
	_, err = s.centralStore().GetSiteCall(context.Background(), id)
	require.True(s.t, errors.Is(err, centralstore.ErrNotFound))
}

// Two daemons run with the same site id (a copied config; the second an
// `outpost site` process started after the first): the second sees the
// first poll outpost-site-plant-1, waits, refuses new work with a 503
// naming the first, says so on /readyz and its metrics, and polls nothing
// while it holds no call. Every retry of a call the first holds reaches the
// first, and every call is delivered.
func TestSecondDaemonWithTheSameSiteIDWaits(t *testing.T) {
	s := newStack(t, func(c *config.Config) {
		c.Site.PollerCheckInterval = 300 * time.Millisecond
		erp := c.Site.ExternalSystems["erp"]
		erp.MaxRetries = 10
		c.Site.ExternalSystems["erp"] = erp
	})
	require.Eventually(t, func() bool {
		resp, err := s.client.DescribeTaskQueue(context.Background(), contract.SiteTaskQueue(s.cfg.Site.ID), enums.TASK_QUEUE_TYPE_ACTIVITY)
		return err == nil && len(resp.GetPollers()) > 0
	}, 30*time.Second, 100*time.Millisecond, "the first daemon polls before the twin starts")
	twin, startTwin := s.siteProcess("node-b")
	startTwin()
	const calls = 10
	s.demo.FailNext(calls, http.StatusServiceUnavailable)
	ids := make([]string, calls)
	for i := range ids {
		res, code := s.call("erp", "createOrder", map[string]any{"sku": fmt.Sprintf("P-%d", i)})
		require.Equal(t, http.StatusAccepted, code, res.Error)
		ids[i] = res.ID
	}
	for _, id := range ids {
		row := s.waitOperation(id, contract.StatusDelivered, time.Minute)
		require.Equal(t, 1, row.RetryCount)
		_, code := twin.operation(id)
		require.Equal(t, http.StatusNotFound, code, "the twin never held it")
	}
	_, code := twin.call("erp", "createOrder", map[string]any{"sku": "to the twin"})
	require.Equal(t, http.StatusServiceUnavailable, code, "the twin takes no new work")
	var ready sitedaemon.Readiness
	require.Equal(t, http.StatusServiceUnavailable, twin.get("/readyz", &ready))
	families := testutil.ScrapeMetrics(t, twin.url+"/metrics")
	require.Zero(t, testutil.MetricValue(families, "outpost_site_active", nil))
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_other_pollers", nil))
	families = testutil.ScrapeMetrics(t, s.firstSite().url+"/metrics")
	require.Equal(t, 1.0, testutil.MetricValue(families, "outpost_site_active", nil))
	require.Zero(t, testutil.MetricValue(families, "outpost_site_other_pollers", nil), "the waiting twin polls nothing")
}

// siteProcess configures a daemon for the stack's site id as an `outpost
// site` child process: node names its own store and API port, with the
// stack's external system "erp". It returns the daemon's API and what
// starts it (again, on the same store, after a kill).
func (s *stack) siteProcess(node string) (*siteProc, func() *siteProcess) {
	s.t.Helper()
	bin := testutil.BuildOutpost(s.t)
	listen := freeAddr(s.t)
	erp := s.cfg.Site.ExternalSystems["erp"]
	cfgFile := filepath.Join(s.dir, "site-"+node+".yaml")
	require.NoError(s.t, os.WriteFile(cfgFile, fmt.Appendf(nil, `temporal: {address: %s}
site:
  id: %s
  node: %s
  store: %s
  listen: %s
  forward_interval: 1s
  poller_check_interval: %s
  external_systems:
    erp:
      base_url: %s
      timeout: %s
      max_retries: %d
      retry_interval: %s
      methods: {createOrder: {verb: POST, path: /orders}, getOrder: {verb: GET, path: "/orders/{id}"}}
log: {level: error}
`, s.cfg.Temporal.Address, s.cfg.Site.ID, node, filepath.Join(s.dir, "site-"+node+".db"), listen,
		s.cfg.Site.PollerCheckInterval, erp.BaseURL, erp.Timeout, erp.MaxRetries, erp.RetryInterval), 0o644))
	start := func() *siteProcess {
		return startProcessUntil(s.t, bin, "site", cfgFile, "http://"+listen, &http.Client{Timeout: 5 * time.Second}, servesOrWaits)
	}
	return &siteProc{t: s.t, url: "http://" + listen}, start
}

// servesOrWaits reports a /readyz answer of a daemon that serves: ready, or
// waiting because another daemon with its site id holds the site.
func servesOrWaits(resp *http.Response) bool {
	var rd sitedaemon.Readiness
	if resp.StatusCode != http.StatusOK && json.NewDecoder(resp.Body).Decode(&rd) != nil {
		return false
	}
	return resp.StatusCode == http.StatusOK || strings.HasPrefix(rd.Role, "waiting: ")
}

// A call whose target processed it but whose answer was lost, because the
// site daemon was SIGKILLed mid-attempt, is tried again after the restart
// (through central, on the site), and both attempts carry the same
// Idempotency-Key, the operation's id: the target can tell the retry from a
// new order. The caller, having asked "Prefer: respond-async", had the id
// before the attempt began.
func TestSiteKilledMidCallRetriesWithTheSameIdempotencyKey(t *testing.T) {
	s := newStack(t, nil, withoutSite())
	p, start := s.siteProcess("node-a")
	proc := start()
	held, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	s.demo.OnRequest(func(demosystem.Request) {
		first.Do(func() { close(held); <-release }) // the first attempt is processed, its answer never arrives
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	req, err := http.NewRequest(http.MethodPost, p.url+"/v1/calls", strings.NewReader(`{"system":"erp","method":"createOrder","params":{"sku":"P-100"}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Prefer", "respond-async")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var accepted site.CallResult
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&accepted))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the target never got the first attempt")
	}
	proc.kill()
	close(release)
	start()

	require.Eventually(t, func() bool {
		row, code := p.operation(accepted.ID)
		return code == http.StatusOK && row.Status == contract.StatusDelivered
	}, 2*time.Minute, 200*time.Millisecond, "retried after the restart and delivered")
	requests := s.demo.Requests()
	require.Len(t, requests, 2, "the lost attempt and its retry")
	for _, r := range requests {
		require.Equal(t, accepted.ID, r.Header.Get("Idempotency-Key"))
	}
}

// Central (Temporal) away: the site retries its own calls at each
// definition's interval. A call whose target fails three times then
// recovers is Delivered on the site before Temporal returns; a call that
// never recovers uses up its retries and is Parked on the site (tracking
// row, status API). When Temporal is back the parked call's workflow shows
// OutpostStatus="Parked" from the state the site reached, and an operator's
// retry delivers it.
func TestSiteRetriesItsCallsWhileCentralIsAway(t *testing.T) {
	s := newStack(t, nil)
	s.stopTemporal()

	s.demo.FailNext(3, http.StatusServiceUnavailable)
	recovers, code := s.call("erp", "createOrder", map[string]any{"sku": "recovers"})
	require.Equal(t, http.StatusAccepted, code, recovers.Error)
	row := s.waitOperation(recovers.ID, contract.StatusDelivered, time.Minute)
	require.Equal(t, 3, row.RetryCount, "the immediate attempt and two retries failed; the third retry delivered")
	require.Nil(t, s.server, "delivered by the site alone, Temporal still down")

	s.demo.FailNext(-1, http.StatusServiceUnavailable)
	never, code := s.call("erp", "createOrder", map[string]any{"sku": "never"})
	require.Equal(t, http.StatusAccepted, code, never.Error)
	parked := s.waitOperation(never.ID, contract.StatusParked, time.Minute)
	require.Equal(t, s.cfg.Site.ExternalSystems["erp"].MaxRetries, parked.RetryCount)
	require.Contains(t, parked.LastError, "retries exhausted (3)")
	require.Equal(t, 1, s.bufferDepth(), "the parked call stays buffered for central")

	s.demo.Recover()
	s.startTemporal()
	s.waitParkedCount(fmt.Sprintf(`OutpostStatus="Parked" AND WorkflowId=%q`, contract.CachedCallWorkflowID(never.ID)), 1, time.Minute)
	answer, err := s.client.QueryWorkflow(t.Context(), contract.CachedCallWorkflowID(never.ID), "", contract.QueryStatus)
	require.NoError(t, err)
	var state contract.CachedCallState
	require.NoError(t, answer.Get(&state))
	require.Equal(t, contract.StatusParked, state.Status)
	require.Equal(t, 3, state.RetryCount, "the workflow continues from the site's state")

	require.NoError(t, s.client.SignalWorkflow(t.Context(), contract.CachedCallWorkflowID(never.ID), "",
		contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "ERP back"}))
	s.waitOperation(never.ID, contract.StatusDelivered, time.Minute)
	s.waitMirror(never.ID, contract.StatusDelivered)
	s.waitMirror(recovers.ID, contract.StatusDelivered)
	require.Zero(t, s.bufferDepth())
	s.recordHistory(contract.CachedCallWorkflowID(never.ID), "cachedcall_parked_on_site.json")
}

// requireHeartbeatTimeouts checks that the workflow scheduled n retries on
// the site, each with the heartbeat timeout the site's daemon handed off:
// a daemon that dies mid-attempt is seen gone within it.
func requireHeartbeatTimeouts(t *testing.T, history []*historypb.HistoryEvent, n int) {
	t.Helper()
	var got []time.Duration
	for _, ev := range history {
		if attrs := ev.GetActivityTaskScheduledEventAttributes(); attrs != nil && attrs.GetActivityType().GetName() == "DeliverCachedCall" {
			got = append(got, attrs.GetHeartbeatTimeout().AsDuration())
		}
	}
	require.Equal(t, slices.Repeat([]time.Duration{heartbeat.Timeout}, n), got)
}
