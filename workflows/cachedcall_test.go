package workflows_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/activities/heartbeat"
	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/internal/workflowtest"
	"github.com/outpost-dev/outpost/temporalcontract"
	"github.com/outpost-dev/outpost/workflows"
)

type cachedCallSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	// started runs the call a site started with its submission as the
	// input (WorkflowCachedCallStarted) instead of signalling it.
	started bool
	// input is the submission the started call gets.
	input contract.CachedCallSubmission
	env   *testsuite.TestWorkflowEnvironment
	// statusAttrs is every OutpostStatus value the workflow upserted, in order.
	statusAttrs []string
	// delivers records each DeliverCachedCall input and the workflow time it ran at.
	delivers   []contract.DeliverCachedCallInput
	deliverAt  []time.Time
	resolves   []contract.ResolveParkedCallInput
	resolvesAt []time.Time
}

func TestCachedCallWorkflow(t *testing.T) { suite.Run(t, new(cachedCallSuite)) }

// TestCachedCallWorkflowStarted runs the suite as a site starts the call
// when every central worker is of generation 4 or later: the submission is
// the input, no signal carries it.
func TestCachedCallWorkflowStarted(t *testing.T) { suite.Run(t, &cachedCallSuite{started: true}) }

// callT0 starts the mock clock of every workflow test: in the future,
// never a fixed date. The SDK's test environment computes a local
// activity's deadline from the mock clock but waits for it on the wall
// clock, so a start in the past makes each local activity's deadline
// already expired: whether its result or "deadline exceeded" wins is then a
// race, lost on a loaded machine, and the lost run keeps executing beside
// its retry.
var callT0 = time.Now().UTC().Truncate(time.Second).Add(24 * time.Hour)

var (
	callPolicy = contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: 90 * time.Second}
)

const callSite = "plant-1"

func callSubmission() contract.CachedCallSubmission {
	at := callT0
	return contract.CachedCallSubmission{
		OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder", SiteID: callSite,
		Policy: callPolicy, LastAttemptAt: &at, LastError: "HTTP 503 Service Unavailable", CreatedAt: callT0.Add(-time.Second),
	}
}

// callRow is the site's tracking row of op-1 as a site activity returns it.
func callRow(status contract.Status, retries int, lastError string) contract.TrackedOperation {
	at := callT0.Add(time.Duration(retries) * time.Minute)
	return contract.TrackedOperation{
		OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder", Status: status,
		RetryCount: retries, LastError: lastError, SourceSiteID: callSite, SourceNode: "node-a",
		CreatedAt: callT0.Add(-time.Second), UpdatedAt: at, LastAttemptAt: &at, Seq: int64(10 + retries),
	}
}

var errUnexpectedCall = temporal.NewNonRetryableApplicationError("unexpected extra activity call", "Test", nil)

func (s *cachedCallSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.SetStartTime(callT0)
	s.env.RegisterWorkflowWithOptions(workflows.CachedCallWorkflow, workflow.RegisterOptions{Name: contract.WorkflowCachedCall})
	s.env.RegisterWorkflowWithOptions(workflows.CachedCallWorkflowStarted, workflow.RegisterOptions{Name: contract.WorkflowCachedCallStarted})
	site := &onsite.SiteActivities{}
	s.env.RegisterActivity(site)
	s.env.RegisterActivity(&activities.AuditActivities{})
	// Auditing is tested in audit_test.go; here it only succeeds.
	s.env.OnActivity(auditActs.AuditOperatorAction, mock.Anything, mock.Anything).Return(nil)
	// The site activities exist only on the site's own queue: an activity
	// scheduled anywhere else finds no worker and fails the test.
	s.env.SetActivityTaskQueue(contract.SiteTaskQueue(callSite), site.DeliverCachedCall, site.ResolveParkedCall)
	s.statusAttrs, s.delivers, s.deliverAt, s.resolves, s.resolvesAt = nil, nil, nil, nil, nil
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(temporalcontract.AttrStatus); ok {
			s.statusAttrs = append(s.statusAttrs, v)
		}
	}).Return(nil)
}

func (s *cachedCallSuite) submitAt(sub contract.CachedCallSubmission, after time.Duration) {
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalSubmit, sub) }, after)
}

// submit hands the call off as the suite names: the start's input, or a
// submit signal at once.
func (s *cachedCallSuite) submit(sub contract.CachedCallSubmission) {
	if s.started {
		s.input = sub
		return
	}
	s.submitAt(sub, 0)
}

// execute runs the call handed off by submit.
func (s *cachedCallSuite) execute() {
	if s.started {
		s.env.ExecuteWorkflow(contract.WorkflowCachedCallStarted, s.input)
		return
	}
	s.env.ExecuteWorkflow(contract.WorkflowCachedCall)
}

// deliverReturns makes DeliverCachedCall answer rows in turn. A call past
// the last row fails the workflow at once instead of retrying forever.
func (s *cachedCallSuite) deliverReturns(rows ...contract.TrackedOperation) {
	s.env.OnActivity(siteActs.DeliverCachedCall, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverCachedCallInput) (contract.TrackedOperation, error) {
			s.delivers = append(s.delivers, in)
			s.deliverAt = append(s.deliverAt, s.env.Now().UTC())
			if len(s.delivers) > len(rows) {
				return contract.TrackedOperation{}, errUnexpectedCall
			}
			return rows[len(s.delivers)-1], nil
		})
}

func (s *cachedCallSuite) resolveReturns(rows ...contract.TrackedOperation) {
	s.env.OnActivity(siteActs.ResolveParkedCall, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.ResolveParkedCallInput) (contract.TrackedOperation, error) {
			s.resolves = append(s.resolves, in)
			s.resolvesAt = append(s.resolvesAt, s.env.Now().UTC())
			if len(s.resolves) > len(rows) {
				return contract.TrackedOperation{}, errUnexpectedCall
			}
			return rows[len(s.resolves)-1], nil
		})
}

func (s *cachedCallSuite) result() contract.TrackedOperation {
	return s.resultState().TrackedOperation
}

func (s *cachedCallSuite) resultState() contract.CachedCallState {
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var st contract.CachedCallState
	s.Require().NoError(s.env.GetWorkflowResult(&st))
	return st
}

func (s *cachedCallSuite) queryStatus() contract.CachedCallState {
	return workflowtest.QueryStatus[contract.CachedCallState](s.T(), s.env)
}

func (s *cachedCallSuite) retryCounts() []int {
	out := []int{}
	for _, in := range s.delivers {
		out = append(out, in.RetryCount)
	}
	return out
}

func (s *cachedCallSuite) TestFailsTwiceThenDelivered() {
	s.submit(callSubmission())
	s.deliverReturns(
		callRow(contract.StatusRetrying, 1, "HTTP 503 Service Unavailable"),
		callRow(contract.StatusRetrying, 2, "HTTP 503 Service Unavailable"),
		callRow(contract.StatusDelivered, 3, ""),
	)
	s.execute()

	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(3, st.RetryCount)
	s.Equal([]int{0, 1, 2}, s.retryCounts())
	for _, in := range s.delivers {
		s.Equal("op-1", in.OperationID)
		s.Equal(callPolicy, in.Policy)
	}
	s.Require().Len(s.deliverAt, 3)
	s.False(s.deliverAt[0].Before(callT0.Add(callPolicy.Interval)),
		"first retry at %s, before one interval after the immediate attempt", s.deliverAt[0])
	s.Equal(callT0.Add(callPolicy.Interval), s.deliverAt[0], "and no later either")
	s.Equal(callPolicy.Interval, s.deliverAt[1].Sub(s.deliverAt[0]))
	s.Equal(callPolicy.Interval, s.deliverAt[2].Sub(s.deliverAt[1]))
	s.Equal([]string{"Retrying", "Retrying", "Delivered"}, s.statusAttrs)
	s.env.AssertNotCalled(s.T(), nameOf(siteActs.ResolveParkedCall), mock.Anything, mock.Anything)
}

// A call handed off long after its immediate attempt is retried at once.
func (s *cachedCallSuite) TestLateHandOffRetriesAtOnce() {
	sub := callSubmission()
	late := callT0.Add(-10 * time.Minute)
	sub.LastAttemptAt = &late
	s.submit(sub)
	s.deliverReturns(callRow(contract.StatusDelivered, 1, ""))
	s.execute()

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Require().Len(s.deliverAt, 1)
	s.Equal(callT0, s.deliverAt[0])
}

func (s *cachedCallSuite) TestParksThenOperatorRetryDelivers() {
	s.submit(callSubmission())
	s.deliverReturns(
		callRow(contract.StatusParked, 2, "retries exhausted (2): HTTP 503 Service Unavailable"),
		callRow(contract.StatusDelivered, 1, ""),
	)
	s.resolveReturns(callRow(contract.StatusRetrying, 0, "retries exhausted (2): HTTP 503 Service Unavailable"))
	s.env.RegisterDelayedCallback(func() {
		s.Equal(contract.StatusParked, s.queryStatus().Status)
		s.Nil(s.queryStatus().LastOperatorAction)
		s.Empty(s.resolves, "nothing happens to a parked call before the operator acts")
		s.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "fixed"})
	}, time.Hour)
	s.execute()

	st := s.resultState()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(&contract.OperatorAction{Operator: "ana", Reason: "fixed"}, st.LastOperatorAction,
		"who retried it, and why, stays on the item after the delivery that followed")
	s.Require().Len(s.resolves, 1)
	s.Equal(contract.ResolveParkedCallInput{OperationID: "op-1", Retry: true,
		Action: contract.OperatorAction{Operator: "ana", Reason: "fixed"}}, s.resolves[0])
	s.Equal([]int{0, 0}, s.retryCounts(), "the operator's retry starts the count again")
	s.Require().Len(s.deliverAt, 2)
	s.Equal(s.resolvesAt[0], s.deliverAt[1], "the retry is made as soon as the operator asks")
	s.Equal([]string{"Parked", "Retrying", "Delivered"}, s.statusAttrs)
}

func (s *cachedCallSuite) TestParksThenDiscard() {
	s.submit(callSubmission())
	s.deliverReturns(callRow(contract.StatusParked, 1, "permanent failure: HTTP 400 Bad Request"))
	discarded := callRow(contract.StatusDiscarded, 1, "permanent failure: HTTP 400 Bad Request")
	s.resolveReturns(discarded)
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{Operator: "bo"})
	}, time.Hour)
	s.execute()

	s.Equal(discarded, s.result())
	s.Require().Len(s.resolves, 1)
	s.False(s.resolves[0].Retry)
	s.Equal("bo", s.resolves[0].Action.Operator)
	s.Len(s.delivers, 1)
	s.Equal([]string{"Parked", "Discarded"}, s.statusAttrs)
}

// A retry clicked while the call was still Retrying must not act on the
// park that follows: the workflow waits for a new operator action.
func (s *cachedCallSuite) TestStaleRetryIsNotAppliedToALaterPark() {
	s.submit(callSubmission())
	s.deliverReturns(
		callRow(contract.StatusRetrying, 1, "HTTP 503 Service Unavailable"),
		callRow(contract.StatusParked, 2, "retries exhausted (2): HTTP 503 Service Unavailable"),
	)
	s.resolveReturns(callRow(contract.StatusDiscarded, 2, "retries exhausted (2): HTTP 503 Service Unavailable"))
	// Retries at 1m and 2m; the stale retry arrives in between.
	s.env.RegisterDelayedCallback(func() {
		s.Equal(contract.StatusRetrying, s.queryStatus().Status)
		s.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{Operator: "ana"})
	}, 90*time.Second)
	s.env.RegisterDelayedCallback(func() {
		s.False(s.env.IsWorkflowCompleted())
		s.Equal(contract.StatusParked, s.queryStatus().Status)
		s.Empty(s.resolves, "the stale retry was applied to the park")
		s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{Operator: "bo"})
	}, time.Hour)
	s.execute()

	s.Equal(contract.StatusDiscarded, s.result().Status)
	s.Require().Len(s.resolves, 1)
	s.False(s.resolves[0].Retry)
	s.Equal("bo", s.resolves[0].Action.Operator)
	s.Equal(callT0.Add(time.Hour), s.resolvesAt[0])
	s.Len(s.delivers, 2)
}

// A second submit (the site resending before it saw the acknowledgement)
// changes nothing: not the operation, the site, nor the policy.
func (s *cachedCallSuite) TestDuplicateSubmitIsIgnored() {
	s.submit(callSubmission())
	other := contract.CachedCallSubmission{
		OperationID: "op-2", Kind: contract.KindDatabaseWrite, Target: "historian", SiteID: "plant-2",
		Policy: contract.RetryPolicy{Interval: 10 * time.Minute, MaxRetries: 9, AttemptTimeout: time.Minute},
	}
	s.submitAt(other, 30*time.Second)
	s.deliverReturns(
		callRow(contract.StatusRetrying, 1, "HTTP 503 Service Unavailable"),
		callRow(contract.StatusDelivered, 2, ""),
	)
	s.env.RegisterDelayedCallback(func() {
		st := s.queryStatus()
		s.Equal("op-1", st.OperationID)
		s.Equal(callSite, st.SourceSiteID)
	}, 45*time.Second)
	s.execute()

	st := s.result()
	s.Equal("op-1", st.OperationID)
	s.Equal(contract.StatusDelivered, st.Status)
	s.Require().Len(s.delivers, 2)
	for _, in := range s.delivers {
		s.Equal("op-1", in.OperationID)
		s.Equal(callPolicy, in.Policy)
	}
	s.Equal(callT0.Add(callPolicy.Interval), s.deliverAt[0])
	s.Equal(callPolicy.Interval, s.deliverAt[1].Sub(s.deliverAt[0]))
}

func (s *cachedCallSuite) TestStatusQueryAnswersCurrentRow() {
	sub := callSubmission()
	s.submit(sub)
	parked := callRow(contract.StatusParked, 2, "retries exhausted (2): HTTP 503 Service Unavailable")
	s.deliverReturns(parked)
	s.resolveReturns(callRow(contract.StatusDiscarded, 2, parked.LastError))
	// Before the first retry: the submission as a Pending row.
	s.env.RegisterDelayedCallback(func() {
		s.Equal(contract.TrackedOperation{
			OperationID: sub.OperationID, Kind: sub.Kind, Target: sub.Target, Status: contract.StatusPending,
			LastError: sub.LastError, SourceSiteID: sub.SiteID, CreatedAt: sub.CreatedAt, LastAttemptAt: sub.LastAttemptAt,
		}, s.queryStatus().TrackedOperation)
	}, 30*time.Second)
	// Parked: exactly the row the site returned.
	s.env.RegisterDelayedCallback(func() {
		s.Equal(contract.CachedCallState{TrackedOperation: parked}, s.queryStatus())
		s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{})
	}, time.Hour)
	s.execute()

	s.Equal(contract.StatusDiscarded, s.result().Status)
	s.Len(s.resolves, 1)
}

// A daemon that does not hold the operation (another daemon with the same
// site id took the task) fails it retryably; the retry reaches the daemon
// that holds it, and the call goes on.
func (s *cachedCallSuite) TestUnknownOperationIsRetriedUntilItsDaemonAnswers() {
	s.submit(callSubmission())
	calls := 0
	s.env.OnActivity(siteActs.DeliverCachedCall, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverCachedCallInput) (contract.TrackedOperation, error) {
			calls++
			if calls <= 2 {
				return contract.TrackedOperation{}, temporal.NewApplicationError(
					"operation "+in.OperationID+" is not in this daemon's tracking table", contract.ErrTypeUnknownOperation)
			}
			return contract.TrackedOperation{OperationID: in.OperationID, Status: contract.StatusDelivered, RetryCount: 1}, nil
		})
	s.execute()

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Equal(3, calls, "two refusals by the wrong daemon, then the delivery")
}

// A Pending answer (the site's immediate attempt recorded late) is retried,
// never taken as the end of the call.
func (s *cachedCallSuite) TestPendingAnswerIsRetried() {
	s.submit(callSubmission())
	s.deliverReturns(
		callRow(contract.StatusPending, 0, "timeout"),
		callRow(contract.StatusDelivered, 1, ""),
	)
	s.execute()

	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal([]int{0, 0}, s.retryCounts(), "the next retry follows the row's own count")
	s.Require().Len(s.deliverAt, 2)
	s.Equal(callPolicy.Interval, s.deliverAt[1].Sub(s.deliverAt[0]))
}

// A target that answered 429 or 503 with Retry-After gets the wait it asked
// for (the site sets the row's next attempt; capped there at ten
// intervals), before the first retry and between retries; otherwise the
// fixed interval holds.
func (s *cachedCallSuite) TestRetryAfterIsHonoured() {
	sub := callSubmission()
	firstDue := callT0.Add(5 * time.Minute)
	sub.NextAttemptAt = &firstDue
	s.submit(sub)
	retrying := callRow(contract.StatusRetrying, 1, "HTTP 429 Too Many Requests")
	secondDue := firstDue.Add(7 * time.Minute)
	retrying.NextAttemptAt = &secondDue
	s.deliverReturns(retrying, callRow(contract.StatusDelivered, 2, ""))
	s.execute()

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Equal([]time.Time{firstDue, secondDue}, s.deliverAt)
}

// A cancel request is a discard applied on the site: parked or between
// retries, the site's row ends Discarded (its buffered call dropped) and the
// workflow completes with who-and-why on the item.
func (s *cachedCallSuite) TestCancelIsADiscardOnTheSite() {
	for _, tc := range []struct {
		name     string
		delivers []contract.TrackedOperation
		cancelAt time.Duration
	}{
		{"parked", []contract.TrackedOperation{callRow(contract.StatusParked, 2, "retries exhausted (2): HTTP 503")}, time.Hour},
		{"retrying", []contract.TrackedOperation{callRow(contract.StatusRetrying, 1, "HTTP 503")}, 90 * time.Second},
	} {
		s.Run(tc.name, func() {
			s.SetupTest()
			s.submit(callSubmission())
			s.deliverReturns(tc.delivers...)
			s.resolveReturns(callRow(contract.StatusDiscarded, 1, "HTTP 503"))
			s.env.RegisterDelayedCallback(s.env.CancelWorkflow, tc.cancelAt)
			s.execute()

			st := s.resultState()
			s.Equal(contract.StatusDiscarded, st.Status)
			s.Require().NotNil(st.LastOperatorAction)
			s.Contains(st.LastOperatorAction.Reason, "workflow cancelled")
			s.Require().Len(s.resolves, 1)
			s.False(s.resolves[0].Retry)
			s.True(s.resolves[0].Cancelled, "applies to a call in any state not final")
		})
	}
}

// A cached call's attempt on its site runs with the heartbeat timeout the
// site handed off, and heartbeats while it works: here a target that takes
// longer than two heartbeat intervals to answer. The workflow runs the real
// site activity over a real site store and HTTP target.
func TestCachedCallAttemptHeartbeats(t *testing.T) {
	slow := 2*heartbeat.Every + time.Second
	erp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(slow)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(erp.Close)
	store, err := sitestore.Open(context.Background(), filepath.Join(t.TempDir(), "site.db"), sitestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	reg := targets.New(map[string]targets.ExternalSystem{"erp": {
		BaseURL: erp.URL, Timeout: time.Minute, MaxRetries: 2, RetryInterval: time.Minute,
		Methods: map[string]targets.Method{"createOrder": {Verb: "POST", Path: "/orders"}},
	}}, nil)
	exec := targetexec.New(reg)
	t.Cleanup(func() { exec.Close() })
	payload, err := targets.Encode(targets.Request{Kind: contract.KindExternalCall, System: "erp", Method: "createOrder"})
	require.NoError(t, err)
	_, err = store.BeginOperation(context.Background(), sitestore.NewOperation{
		OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder", Payload: payload,
		Provenance: sitestore.Provenance{SiteID: callSite, Node: "node-a"},
	})
	require.NoError(t, err)

	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetTestTimeout(time.Minute) // the attempt takes real seconds
	site := &onsite.SiteActivities{Store: store, Targets: reg, Executor: exec, Node: "node-a"}
	env.RegisterActivity(site)
	env.SetActivityTaskQueue(contract.SiteTaskQueue(callSite), site.DeliverCachedCall, site.ResolveParkedCall)
	var scheduledWith []time.Duration // each attempt's heartbeat timeout
	env.SetOnActivityStartedListener(func(_ *activity.Info, ctx context.Context, _ converter.EncodedValues) {
		scheduledWith = append(scheduledWith, activity.GetInfo(ctx).HeartbeatTimeout)
	})
	var beats []string
	env.SetOnActivityHeartbeatListener(func(info *activity.Info, _ converter.EncodedValues) {
		beats = append(beats, info.ActivityType.Name)
	})

	sub := callSubmission()
	sub.LastAttemptAt = nil // retry at once
	sub.Policy.HeartbeatTimeout = heartbeat.Timeout
	env.ExecuteWorkflow(workflows.CachedCallWorkflowStarted, sub)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var state contract.CachedCallState
	require.NoError(t, env.GetWorkflowResult(&state))
	require.Equal(t, contract.StatusDelivered, state.Status)
	require.Equal(t, []time.Duration{heartbeat.Timeout}, scheduledWith, "one attempt, with the site's heartbeat timeout")
	require.NotEmpty(t, beats, "an attempt of %s heartbeats", slow)
	for _, name := range beats {
		require.Equal(t, "DeliverCachedCall", name)
	}
}
