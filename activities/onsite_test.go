package activities_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/callstate"
	"github.com/outpost-dev/outpost/internal/centraltest"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/workflows"
)

func TestImmediateOutcome(t *testing.T) {
	t.Parallel()
	unavailable := &targets.Failure{Code: 503, Message: "HTTP 503 Service Unavailable"}
	cases := []struct {
		name       string
		err        error
		wantStatus contract.Status
		wantError  string
	}{
		{"success", nil, contract.StatusDelivered, ""},
		{"transient failure", unavailable, contract.StatusPending, "HTTP 503 Service Unavailable"},
		{"wrapped transient failure", fmt.Errorf("call erp.createOrder: %w", unavailable), contract.StatusPending,
			"call erp.createOrder: HTTP 503 Service Unavailable"},
		{"network failure", &targets.Failure{Message: "dial tcp 127.0.0.1:1: connection refused"}, contract.StatusPending,
			"dial tcp 127.0.0.1:1: connection refused"},
		{"permanent failure", &targets.Failure{Permanent: true, Code: 400, Message: `HTTP 400 Bad Request: {"error":"no such order"}`},
			contract.StatusFailed, `HTTP 400 Bad Request: {"error":"no such order"}`},
		{"invalid request", &targets.InvalidError{Field: "method", Reason: `system "erp" has no method "nope"`},
			contract.StatusFailed, `method: system "erp" has no method "nope"`},
	}
	for _, c := range cases {
		status, lastError := callstate.ImmediateOutcome(c.err)
		require.Equal(t, c.wantStatus, status, c.name)
		require.Equal(t, c.wantError, lastError, c.name)
	}
}

func TestRetryOutcome(t *testing.T) {
	t.Parallel()
	unavailable := &targets.Failure{Code: 503, Message: "HTTP 503 Service Unavailable"}
	rejected := &targets.Failure{Permanent: true, Code: 422, Message: "HTTP 422 Unprocessable Entity"}
	invalid := &targets.InvalidError{Field: "connection", Reason: `unknown database "gone"`}
	cases := []struct {
		name                string
		err                 error
		retries, maxRetries int
		wantStatus          contract.Status
		wantError           string
	}{
		{"success", nil, 3, 3, contract.StatusDelivered, ""},
		{"transient, first retry", unavailable, 1, 3, contract.StatusRetrying, "HTTP 503 Service Unavailable"},
		{"transient, under max", unavailable, 2, 3, contract.StatusRetrying, "HTTP 503 Service Unavailable"},
		{"transient, at max", unavailable, 3, 3, contract.StatusParked, "retries exhausted (3): HTTP 503 Service Unavailable"},
		// With no retries allowed a call parks on its immediate attempt
		// (DeliverCachedCall): retry 1 is an operator's retry.
		{"transient, operator's retry, no retries allowed", unavailable, 1, 0, contract.StatusParked, "retries exhausted (0): HTTP 503 Service Unavailable"},
		{"permanent", rejected, 1, 3, contract.StatusParked, "permanent failure: HTTP 422 Unprocessable Entity"},
		{"invalid", invalid, 1, 3, contract.StatusParked, `permanent failure: connection: unknown database "gone"`},
	}
	for _, c := range cases {
		status, lastError := callstate.RetryOutcome(c.err, c.retries, c.maxRetries)
		require.Equal(t, c.wantStatus, status, c.name)
		require.Equal(t, c.wantError, lastError, c.name)
	}
}

var siteT0 = centralT0 // see centralT0: a mock clock never starts in the past

// erpServer is the external system: it counts requests and answers with the
// status the test sets.
type erpServer struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	paths  []string
	bodies []string
	keys   []string // the Idempotency-Key of each request
}

func newERPServer(t *testing.T, status int) *erpServer {
	t.Helper()
	e := &erpServer{status: status}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.paths = append(e.paths, r.URL.Path)
		e.bodies = append(e.bodies, string(body))
		e.keys = append(e.keys, r.Header.Get("Idempotency-Key"))
		status := e.status
		e.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"ok":false}`)
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *erpServer) answer(status int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status = status
}

// request is the nth request received: its path and body.
func (e *erpServer) request(n int) (path, body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.paths[n], e.bodies[n]
}

func (e *erpServer) requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.paths)
}

// site is a real site store, a real registry pointed at the erp server and
// the activities over them, run through Temporal's activity test environment.
type site struct {
	t     *testing.T
	erp   *erpServer
	store *sitestore.Store
	acts  *onsite.SiteActivities
	env   *testsuite.TestActivityEnvironment
	now   time.Time
}

func newSite(t *testing.T, status int) *site {
	t.Helper()
	s := &site{t: t, erp: newERPServer(t, status), now: siteT0}
	clock := func() time.Time { return s.now }
	store, err := sitestore.Open(context.Background(), filepath.Join(t.TempDir(), "site.db"), sitestore.Options{Now: clock})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	reg := targets.New(map[string]targets.ExternalSystem{"erp": {
		BaseURL: s.erp.URL, Timeout: 5 * time.Second, MaxRetries: 2, RetryInterval: time.Minute,
		Methods: map[string]targets.Method{"createOrder": {Verb: "POST", Path: "/orders/{id}"}},
	}}, nil)
	exec := targetexec.New(reg)
	t.Cleanup(func() { exec.Close() })
	s.store = store
	s.acts = &onsite.SiteActivities{Store: store, Targets: reg, Executor: exec, Now: clock}
	var ts testsuite.WorkflowTestSuite
	s.env = ts.NewTestActivityEnvironment()
	s.env.RegisterActivity(s.acts)
	return s
}

// buffer tracks a call whose immediate attempt failed transiently, as the
// site's client does: BeginOperation, then RecordAttempt(Pending).
func (s *site) buffer(id string) contract.TrackedOperation {
	s.t.Helper()
	ctx := context.Background()
	req := targets.Request{Kind: contract.KindExternalCall, System: "erp", Method: "createOrder",
		Params: map[string]any{"id": id, "qty": 3}}
	payload, err := targets.Encode(req)
	require.NoError(s.t, err)
	_, err = s.store.BeginOperation(ctx, sitestore.NewOperation{
		OperationID: id, Kind: req.Kind, Target: "erp.createOrder", Payload: payload,
		Provenance: sitestore.Provenance{SiteID: "plant-1", Node: "node-a"}, AttemptGrace: time.Minute,
	})
	require.NoError(s.t, err)
	at, next := s.now, s.now.Add(time.Minute)
	row, err := s.store.RecordAttempt(ctx, sitestore.Attempt{
		OperationID: id, Status: contract.StatusPending, LastError: "HTTP 503 Service Unavailable", At: &at, NextAttemptAt: &next,
	})
	require.NoError(s.t, err)
	return row
}

func (s *site) deliver(in contract.DeliverCachedCallInput) (contract.TrackedOperation, error) {
	return s.run(s.acts.DeliverCachedCall, in)
}

func (s *site) resolve(in contract.ResolveParkedCallInput) (contract.TrackedOperation, error) {
	return s.run(s.acts.ResolveParkedCall, in)
}

func (s *site) run(activity, in any) (contract.TrackedOperation, error) {
	s.t.Helper()
	v, err := s.env.ExecuteActivity(activity, in)
	if err != nil {
		return contract.TrackedOperation{}, err
	}
	var row contract.TrackedOperation
	require.NoError(s.t, v.Get(&row))
	return row, nil
}

func (s *site) stored(id string) contract.TrackedOperation {
	s.t.Helper()
	row, err := s.store.GetOperation(context.Background(), id)
	require.NoError(s.t, err)
	return row
}

// when is *p, failing the test when p is nil.
func when(t *testing.T, p *time.Time) time.Time {
	t.Helper()
	require.NotNil(t, p)
	return *p
}

var sitePolicy = contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: time.Minute}

func TestDeliverCachedCallRetriesParksAndOperatorRetryDelivers(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusServiceUnavailable)
	s.buffer("op-1")
	require.Zero(t, s.erp.requests())

	// Retry 1 fails transiently: Retrying, next attempt one interval on.
	s.now = siteT0.Add(time.Minute)
	row, err := s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 0, Policy: sitePolicy})
	require.NoError(t, err)
	require.Equal(t, 1, s.erp.requests())
	path, body := s.erp.request(0)
	require.Equal(t, "/orders/op-1", path)
	require.JSONEq(t, `{"qty":3}`, body)
	require.Equal(t, contract.StatusRetrying, row.Status)
	require.Equal(t, 1, row.RetryCount)
	require.Contains(t, row.LastError, "HTTP 503")
	require.Equal(t, s.now, when(t, row.LastAttemptAt))
	require.Equal(t, s.now.Add(sitePolicy.Interval), when(t, row.NextAttemptAt))
	require.Equal(t, s.stored("op-1"), row)

	// The same task redelivered (the worker died after the store write)
	// answers the recorded row and does not call the system again.
	again, err := s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 0, Policy: sitePolicy})
	require.NoError(t, err)
	require.Equal(t, 1, s.erp.requests())
	require.Equal(t, row, again)

	// Retry 2 is the last one allowed: Parked.
	s.now = siteT0.Add(2 * time.Minute)
	row, err = s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 1, Policy: sitePolicy})
	require.NoError(t, err)
	require.Equal(t, 2, s.erp.requests())
	require.Equal(t, contract.StatusParked, row.Status)
	require.Equal(t, 2, row.RetryCount)
	require.Contains(t, row.LastError, "retries exhausted (2): HTTP 503")
	require.Nil(t, row.NextAttemptAt)
	require.Nil(t, row.TerminalAt)
	_, err = s.store.OperationPayload(context.Background(), "op-1")
	require.NoError(t, err, "a parked call stays buffered for an operator retry")

	// A parked call takes no attempt.
	again, err = s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 2, Policy: sitePolicy})
	require.NoError(t, err)
	require.Equal(t, 2, s.erp.requests())
	require.Equal(t, row, again)

	// The operator retries: back to Retrying with the count reset, due now.
	s.now = siteT0.Add(time.Hour)
	parkedAt := when(t, row.LastAttemptAt)
	row, err = s.resolve(contract.ResolveParkedCallInput{OperationID: "op-1", Retry: true,
		Action: contract.OperatorAction{Operator: "ana", Reason: "erp is back"}})
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, row.Status)
	require.Equal(t, 0, row.RetryCount)
	require.Equal(t, s.now, when(t, row.NextAttemptAt))
	require.Equal(t, parkedAt, when(t, row.LastAttemptAt), "an operator action is not an attempt")
	require.Contains(t, row.LastError, "retries exhausted (2)")
	require.Equal(t, 2, s.erp.requests())

	// The same resolve redelivered changes nothing.
	again, err = s.resolve(contract.ResolveParkedCallInput{OperationID: "op-1", Retry: true})
	require.NoError(t, err)
	require.Equal(t, row, again)

	// The system is back: Delivered, and the buffered call is gone.
	s.erp.answer(http.StatusCreated)
	s.now = siteT0.Add(time.Hour + time.Second)
	row, err = s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 0, Policy: sitePolicy})
	require.NoError(t, err)
	require.Equal(t, 3, s.erp.requests())
	require.Equal(t, contract.StatusDelivered, row.Status)
	require.Equal(t, 1, row.RetryCount)
	require.Empty(t, row.LastError)
	require.Nil(t, row.NextAttemptAt)
	require.Equal(t, s.now, when(t, row.TerminalAt))
	_, err = s.store.OperationPayload(context.Background(), "op-1")
	require.ErrorIs(t, err, sitestore.ErrNotFound)

	// Delivered is never delivered again, even for a stale task.
	again, err = s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 0, Policy: sitePolicy})
	require.NoError(t, err)
	require.Equal(t, 3, s.erp.requests())
	require.Equal(t, row, again)
}

// A definition with max_retries 0 allows the immediate attempt only: the
// first retry central asks for parks the call on that attempt's error
// without calling the system. An operator's retry still makes one attempt.
func TestNoRetriesAllowedParksOnTheImmediateAttempt(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusServiceUnavailable)
	s.buffer("op-1")
	noRetries := contract.RetryPolicy{Interval: time.Minute, AttemptTimeout: time.Minute}

	s.now = siteT0.Add(time.Minute)
	row, err := s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 0, Policy: noRetries})
	require.NoError(t, err)
	require.Zero(t, s.erp.requests(), "no retry is allowed")
	require.Equal(t, contract.StatusParked, row.Status)
	require.Equal(t, 0, row.RetryCount)
	require.Equal(t, "retries exhausted (0): HTTP 503 Service Unavailable", row.LastError)
	require.Equal(t, siteT0, when(t, row.LastAttemptAt), "the immediate attempt is the last one")
	require.Nil(t, row.NextAttemptAt)
	require.Equal(t, s.stored("op-1"), row)
	_, err = s.store.OperationPayload(context.Background(), "op-1")
	require.NoError(t, err, "a parked call stays buffered for an operator retry")

	_, err = s.resolve(contract.ResolveParkedCallInput{OperationID: "op-1", Retry: true})
	require.NoError(t, err)
	row, err = s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 0, Policy: noRetries})
	require.NoError(t, err)
	require.Equal(t, 1, s.erp.requests(), "an operator's retry is made")
	require.Equal(t, contract.StatusParked, row.Status)
	require.Equal(t, 1, row.RetryCount)
	require.Contains(t, row.LastError, "retries exhausted (0): HTTP 503")
}

// An immediate attempt the site never recorded (it died mid-call) did not
// use up the call's one attempt: the first retry stands in for it.
func TestNoRetriesAllowedAfterAnUnrecordedImmediateAttemptStillTries(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusCreated)
	payload, err := targets.Encode(targets.Request{Kind: contract.KindExternalCall, System: "erp", Method: "createOrder",
		Params: map[string]any{"id": "op-1"}})
	require.NoError(t, err)
	_, err = s.store.BeginOperation(context.Background(), sitestore.NewOperation{
		OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder", Payload: payload,
		Provenance: sitestore.Provenance{SiteID: "plant-1"}, AttemptGrace: time.Minute,
	})
	require.NoError(t, err)

	row, err := s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", Policy: contract.RetryPolicy{AttemptTimeout: time.Minute}})
	require.NoError(t, err)
	require.Equal(t, 1, s.erp.requests())
	require.Equal(t, contract.StatusDelivered, row.Status)
}

// The workflow over the real site activities: a call allowed no retries
// parks one interval after its immediate attempt, untried, and waits for
// an operator.
func TestCachedCallWithNoRetriesParksWithoutCallingAgain(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusServiceUnavailable)
	immediate := s.buffer("op-1")
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetStartTime(siteT0)
	env.RegisterWorkflowWithOptions(workflows.CachedCallWorkflow, workflow.RegisterOptions{Name: contract.WorkflowCachedCall})
	env.RegisterActivity(s.acts)
	central, _ := centraltest.Open(t)
	env.RegisterActivity(&activities.AuditActivities{Store: central})
	env.SetActivityTaskQueue(contract.SiteTaskQueue("plant-1"), s.acts.DeliverCachedCall, s.acts.ResolveParkedCall)
	sub := contract.CachedCallSubmission{
		OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder", SiteID: "plant-1",
		Policy:        contract.RetryPolicy{Interval: time.Minute, AttemptTimeout: time.Minute},
		LastAttemptAt: immediate.LastAttemptAt, LastError: immediate.LastError, CreatedAt: immediate.CreatedAt,
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.SignalSubmit, sub) }, 0)
	var parked contract.TrackedOperation
	env.RegisterDelayedCallback(func() {
		parked = s.stored("op-1")
		env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{Operator: "bo"})
	}, time.Hour)
	env.ExecuteWorkflow(contract.WorkflowCachedCall)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.Equal(t, contract.StatusParked, parked.Status)
	require.Equal(t, "retries exhausted (0): HTTP 503 Service Unavailable", parked.LastError)
	require.Zero(t, s.erp.requests())
	require.Equal(t, contract.StatusDiscarded, s.stored("op-1").Status)
}

func TestPermanentFailureParksThenDiscardDropsTheCall(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusBadRequest)
	s.buffer("op-1")

	s.now = siteT0.Add(time.Minute)
	policy := contract.RetryPolicy{Interval: time.Minute, MaxRetries: 5, AttemptTimeout: time.Minute}
	row, err := s.deliver(contract.DeliverCachedCallInput{OperationID: "op-1", Policy: policy})
	require.NoError(t, err)
	require.Equal(t, contract.StatusParked, row.Status, "a permanent failure parks at once")
	require.Equal(t, 1, row.RetryCount)
	require.Contains(t, row.LastError, "permanent failure: HTTP 400")

	s.now = siteT0.Add(time.Hour)
	row, err = s.resolve(contract.ResolveParkedCallInput{OperationID: "op-1", Retry: false,
		Action: contract.OperatorAction{Operator: "bo", Reason: "order cancelled"}})
	require.NoError(t, err)
	require.Equal(t, contract.StatusDiscarded, row.Status)
	require.Equal(t, 1, row.RetryCount)
	require.Contains(t, row.LastError, "permanent failure: HTTP 400")
	require.Equal(t, s.now, when(t, row.TerminalAt))
	require.Equal(t, s.stored("op-1"), row)
	_, err = s.store.OperationPayload(context.Background(), "op-1")
	require.ErrorIs(t, err, sitestore.ErrNotFound)
	depth, err := s.store.Depth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth)

	// A redelivered discard, or a late retry, finds it settled and changes nothing.
	again, err := s.resolve(contract.ResolveParkedCallInput{OperationID: "op-1", Retry: true})
	require.NoError(t, err)
	require.Equal(t, row, again)
	require.Equal(t, 1, s.erp.requests())
}

// A daemon that does not hold the operation (a second daemon with the same
// site id took the task, or the store was replaced) fails retryably, so the
// retry reaches the daemon that holds it; it calls nothing.
func TestUnknownOperationIsRetryable(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusOK)
	for name, run := range map[string]func() (contract.TrackedOperation, error){
		"deliver": func() (contract.TrackedOperation, error) {
			return s.deliver(contract.DeliverCachedCallInput{OperationID: "op-gone", Policy: sitePolicy})
		},
		"resolve": func() (contract.TrackedOperation, error) {
			return s.resolve(contract.ResolveParkedCallInput{OperationID: "op-gone", Retry: true})
		},
	} {
		_, err := run()
		require.Error(t, err, name)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%s: %v", name, err)
		require.Equal(t, contract.ErrTypeUnknownOperation, appErr.Type(), name)
		require.False(t, appErr.NonRetryable(), name)
		require.Contains(t, appErr.Error(), "op-gone", name)
	}
	require.Zero(t, s.erp.requests())
}

func TestListTrackingChangesAfterCursorInSeqOrder(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusServiceUnavailable)
	s.buffer("a") // seq 1, 2
	s.buffer("b") // seq 3, 4
	s.buffer("c") // seq 5, 6
	s.now = siteT0.Add(time.Minute)
	_, err := s.deliver(contract.DeliverCachedCallInput{OperationID: "a", Policy: sitePolicy}) // seq 7
	require.NoError(t, err)

	list := func(after int64, limit int) []contract.TrackedOperation {
		t.Helper()
		v, err := s.env.ExecuteActivity(s.acts.ListTrackingChanges, contract.ListTrackingChangesInput{After: after, Limit: limit})
		require.NoError(t, err)
		var rows []contract.TrackedOperation
		require.NoError(t, v.Get(&rows))
		return rows
	}
	summary := func(rows []contract.TrackedOperation) []string {
		out := []string{}
		for _, r := range rows {
			out = append(out, fmt.Sprintf("%s@%d:%s", r.OperationID, r.Seq, r.Status))
		}
		return out
	}

	require.Equal(t, []string{"b@4:Pending", "c@6:Pending", "a@7:Retrying"}, summary(list(2, 10)))
	require.Equal(t, []string{"b@4:Pending", "c@6:Pending"}, summary(list(2, 2)))
	require.Equal(t, []string{"a@7:Retrying"}, summary(list(6, 2)))
	require.Empty(t, list(7, 2))

	// A cursor past the last change number was given out by an earlier
	// store of this site.
	_, err = s.env.ExecuteActivity(s.acts.ListTrackingChanges, contract.ListTrackingChangesInput{After: 8, Limit: 2})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, contract.ErrTypeCursorAhead, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.ErrorContains(t, err, "cursor 8 is past this site's last change 7")
}

func TestNextAttemptAtHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	at, interval := siteT0, time.Minute
	for name, tc := range map[string]struct {
		err  error
		want time.Duration
	}{
		"no failure":                     {nil, interval},
		"a failure without Retry-After":  {&targets.Failure{Code: 503}, interval},
		"Retry-After under the interval": {&targets.Failure{Code: 429, RetryAfter: 10 * time.Second}, interval},
		"Retry-After over the interval":  {&targets.Failure{Code: 429, RetryAfter: 5 * time.Minute}, 5 * time.Minute},
		"Retry-After past ten intervals": {&targets.Failure{Code: 503, RetryAfter: time.Hour}, 10 * interval},
		"wrapped":                        {fmt.Errorf("call: %w", &targets.Failure{Code: 429, RetryAfter: 2 * time.Minute}), 2 * time.Minute},
	} {
		require.Equal(t, at.Add(tc.want), callstate.NextAttemptAt(at, interval, tc.err), name)
	}
}

// Every retry carries the operation's id as its Idempotency-Key, so a
// target that processed an attempt whose answer was lost can tell the
// retry from a new order.
func TestRetriesCarryTheOperationIDAsIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusServiceUnavailable)
	s.buffer("op-7")
	for retry := range 2 {
		s.now = s.now.Add(time.Minute)
		_, err := s.deliver(contract.DeliverCachedCallInput{OperationID: "op-7", RetryCount: retry, Policy: sitePolicy})
		require.NoError(t, err)
	}
	s.erp.mu.Lock()
	defer s.erp.mu.Unlock()
	require.Equal(t, []string{"op-7", "op-7"}, s.erp.keys)
}

// A discard from a cancel request applies to a call between retries too;
// an operator's ordinary retry or discard only to a parked one.
func TestCancelledDiscardAppliesToAnyCallNotFinal(t *testing.T) {
	t.Parallel()
	s := newSite(t, http.StatusServiceUnavailable)
	s.buffer("op-9")
	s.now = s.now.Add(time.Minute)
	row, err := s.deliver(contract.DeliverCachedCallInput{OperationID: "op-9", Policy: sitePolicy})
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, row.Status)

	row, err = s.resolve(contract.ResolveParkedCallInput{OperationID: "op-9"})
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, row.Status, "not parked: an ordinary discard waits")

	row, err = s.resolve(contract.ResolveParkedCallInput{OperationID: "op-9", Cancelled: true})
	require.NoError(t, err)
	require.Equal(t, contract.StatusDiscarded, row.Status)
	_, err = s.store.OperationPayload(context.Background(), "op-9")
	require.ErrorIs(t, err, sitestore.ErrNotFound, "the buffered call is dropped")
}

// While central has not taken a call over (no acknowledged hand-off), the
// site retries it itself when it is due, with its definition's policy
// (max_retries 2, every minute), and parks it when the retries are used
// up. A call handed off is left to its workflow; a call not yet due waits.
func TestRetryOnSiteUntilParkedAndNeverAHandedOffCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSite(t, http.StatusServiceUnavailable)
	s.buffer("op-1")
	dueIDs := func() []string {
		due, err := s.store.DueOnSite(ctx, s.now, 10)
		require.NoError(t, err)
		ids := []string{}
		for _, r := range due {
			ids = append(ids, r.OperationID)
		}
		return ids
	}
	require.Empty(t, dueIDs(), "the first retry waits one interval after the immediate attempt")

	s.now = s.now.Add(time.Minute)
	require.Equal(t, []string{"op-1"}, dueIDs())
	row, err := s.acts.RetryOnSite(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, row.Status, row.LastError)
	require.Equal(t, 1, row.RetryCount)
	require.Equal(t, s.now.Add(time.Minute), when(t, row.NextAttemptAt))

	s.now = s.now.Add(time.Minute)
	require.Equal(t, []string{"op-1"}, dueIDs())
	row, err = s.acts.RetryOnSite(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, contract.StatusParked, row.Status, "the second of two retries failed")
	require.Equal(t, 2, row.RetryCount)
	require.Contains(t, row.LastError, "retries exhausted (2): HTTP 503 Service Unavailable")
	require.Equal(t, 2, s.erp.requests())
	require.Empty(t, dueIDs(), "a parked call waits for an operator")
	_, err = s.store.Get(ctx, "op-1")
	require.NoError(t, err, "the parked call stays buffered for central")

	// Handed off: its workflow drives it, the site does not.
	s.buffer("op-2")
	require.NoError(t, s.store.MarkHandedOff(ctx, "op-2"))
	s.now = s.now.Add(time.Hour)
	require.Empty(t, dueIDs())
	row, err = s.acts.RetryOnSite(ctx, "op-2")
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, row.Status)
	require.Equal(t, 2, s.erp.requests(), "no attempt at a handed-off call")
}

// A workflow's retry and the site's own never run at once: the second sees
// the first's outcome and does not repeat it.
func TestSiteRetryAndWorkflowRetryDoNotOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newSite(t, http.StatusServiceUnavailable)
	s.buffer("op-1")
	s.now = s.now.Add(time.Minute)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, err := s.acts.RetryOnSite(ctx, "op-1")
		require.NoError(t, err)
	}()
	go func() {
		defer wg.Done()
		_, err := s.acts.DeliverCachedCall(ctx, contract.DeliverCachedCallInput{OperationID: "op-1", RetryCount: 0, Policy: sitePolicy})
		require.NoError(t, err)
	}()
	wg.Wait()
	require.Equal(t, 1, s.erp.requests(), "one attempt, not one each")
	require.Equal(t, 1, s.stored("op-1").RetryCount)
}
