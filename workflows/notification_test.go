package workflows_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/workflows"
)

type notificationSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env     *testsuite.TestWorkflowEnvironment
	updates []contract.NotificationUpdate
	// statusAttrs is every OutpostStatus value the workflow upserted, in order.
	statusAttrs []string
	// storeBackAt is when UpdateNotification stops failing (zero: it never fails);
	// storeFailures counts the writes it failed.
	storeBackAt   time.Time
	storeFailures int
	// rowNow, when set, is the central row's terminal state: every update
	// is refused with TerminalRow, as the store does.
	rowNow *contract.NotificationState
}

func TestNotificationWorkflow(t *testing.T) { suite.Run(t, new(notificationSuite)) }

var policy = contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: time.Minute}

var sub = contract.NotificationSubmission{
	NotificationID: "0b0f6a43-7a3c-4c55-9d0c-2f0e8a9c8f11", ListName: "ops", Subject: "Pump 3 tripped",
	Body: "Pressure low", SourceSiteID: "plant-1", SiteEnqueuedAt: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC),
}

func (s *notificationSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterWorkflowWithOptions(workflows.NotificationWorkflow, workflow.RegisterOptions{Name: contract.WorkflowNotification})
	s.env.RegisterActivity(&activities.NotificationActivities{})
	s.updates, s.statusAttrs, s.storeBackAt, s.storeFailures, s.rowNow = nil, nil, time.Time{}, 0, nil
	s.env.OnActivity(notificationActs.UpdateNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, u contract.NotificationUpdate) error {
			if s.rowNow != nil {
				return temporal.NewNonRetryableApplicationError("notification is terminal", contract.ErrTypeTerminalRow, nil, *s.rowNow)
			}
			if s.env.Now().Before(s.storeBackAt) {
				s.storeFailures++
				return errStoreDown
			}
			s.updates = append(s.updates, u)
			return nil
		})
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(contract.AttrStatus); ok {
			s.statusAttrs = append(s.statusAttrs, v)
		}
	}).Return(nil)
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalSubmit, sub) }, 0)
}

var errStoreDown = errors.New("update notification: dial tcp 10.0.0.5:1433: connection refused")

func (s *notificationSuite) recordAs(status contract.Status) { s.recordWith(status, policy) }

func (s *notificationSuite) recordWith(status contract.Status, p contract.RetryPolicy) {
	s.env.OnActivity(notificationActs.RecordNotification, mock.Anything, sub).Return(
		contract.RecordNotificationResult{
			State:  contract.NotificationState{NotificationID: sub.NotificationID, Status: status},
			Policy: p,
		}, nil).Once()
}

func delivered() contract.DeliverNotificationResult {
	return contract.DeliverNotificationResult{DeliveredAt: time.Now().UTC(), ResolvedTargets: []string{"ops@example.com"}}
}

var transient = errors.New("dial tcp 127.0.0.1:2525: connection refused")

func (s *notificationSuite) result() contract.NotificationState {
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var st contract.NotificationState
	s.Require().NoError(s.env.GetWorkflowResult(&st))
	return st
}

func (s *notificationSuite) statuses() []contract.Status {
	out := make([]contract.Status, len(s.updates))
	for i, u := range s.updates {
		out[i] = u.Status
	}
	return out
}

func (s *notificationSuite) queryStatus() contract.NotificationState {
	return queryStatusAs[contract.NotificationState](s.T(), s.env)
}

// queryStatusAs is the answer of the workflow's status query, decoded as T.
func queryStatusAs[T any](t require.TestingT, env *testsuite.TestWorkflowEnvironment) T {
	v, err := env.QueryWorkflow(contract.QueryStatus)
	require.NoError(t, err)
	var st T
	require.NoError(t, v.Get(&st))
	return st
}

func (s *notificationSuite) TestDeliveredOnFirstAttempt() {
	s.recordAs(contract.StatusPending)
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(delivered(), nil).Once()
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(0, st.RetryCount)
	s.Equal([]string{"ops@example.com"}, st.ResolvedTargets)
	s.Empty(s.updates, "a first-try delivery needs no status writes besides the delivery itself")
}

func (s *notificationSuite) TestTransientFailuresRetryAtFixedInterval() {
	s.recordAs(contract.StatusPending)
	var attemptTimes []time.Time
	call := 0
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
			attemptTimes = append(attemptTimes, s.env.Now())
			s.Equal(call, in.RetryCount)
			call++
			if call <= 2 {
				return contract.DeliverNotificationResult{}, transient
			}
			return delivered(), nil
		}).Times(3)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(2, st.RetryCount)
	s.Equal([]contract.Status{contract.StatusRetrying, contract.StatusRetrying}, s.statuses())
	s.Contains(s.updates[0].LastError, "connection refused")
	s.Require().NotNil(s.updates[0].NextAttemptAt)
	s.Require().Len(attemptTimes, 3)
	s.Equal(policy.Interval, attemptTimes[1].Sub(attemptTimes[0]))
	s.Equal(policy.Interval, attemptTimes[2].Sub(attemptTimes[1]))
	s.Equal([]string{"Retrying", "Retrying", "Delivered"}, s.statusAttrs)
}

func (s *notificationSuite) TestExhaustedRetriesParkThenRetryDelivers() {
	s.recordAs(contract.StatusPending)
	failing := true
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
			if failing {
				return contract.DeliverNotificationResult{}, transient
			}
			return delivered(), nil
		})
	// Attempts at 0, 1m, 2m, then parked; the operator retries at 1h.
	s.env.RegisterDelayedCallback(func() {
		st := s.queryStatus()
		s.Equal(contract.StatusParked, st.Status)
		s.Equal(policy.MaxRetries, st.RetryCount)
		s.Contains(st.LastError, "retries exhausted (2)")
		failing = false
		s.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "relay fixed"})
	}, time.Hour)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(0, st.RetryCount, "retry resets the retry count")
	s.Equal(&contract.OperatorAction{Operator: "ana", Reason: "relay fixed"}, st.LastOperatorAction)
	s.Equal([]contract.Status{contract.StatusRetrying, contract.StatusRetrying, contract.StatusParked, contract.StatusPending}, s.statuses())
	s.Equal([]string{"Retrying", "Retrying", "Parked", "Pending", "Delivered"}, s.statusAttrs)
}

// The central store down for minutes (the site already deleted its buffer
// row) delays the notification; it neither fails nor strands it. Four
// minutes, eight times what a store write survived before: the test
// environment gives up an activity's unlimited retries after ten attempts
// (about four and a half minutes here), the server never does.
func (s *notificationSuite) TestStoreOutageDelaysButNeverStrands() {
	t0 := callT0.Add(time.Hour)
	s.env.SetStartTime(t0)
	s.storeBackAt = t0.Add(4 * time.Minute)
	s.recordAs(contract.StatusPending)
	var attemptTimes []time.Time
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
			attemptTimes = append(attemptTimes, s.env.Now())
			if in.Attempt == 1 {
				return contract.DeliverNotificationResult{}, transient
			}
			return delivered(), nil
		})
	s.env.ExecuteWorkflow(contract.WorkflowNotification)

	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal([]contract.Status{contract.StatusRetrying}, s.statuses(), "the Retrying write went through once the store was back")
	s.Positive(s.storeFailures, "the store was down")
	s.Require().Len(attemptTimes, 2, "no attempt is made or repeated while the store is away")
	s.False(attemptTimes[1].Before(s.storeBackAt.Add(policy.Interval)),
		"the retry waits its interval after the Retrying write, at %s", attemptTimes[1])
	s.Equal([]string{"Retrying", "Delivered"}, s.statusAttrs)
}

// A delivery whose activity could not mark the row (the email went out)
// is recorded by the workflow, with its time and recipients, and never
// sent again.
func (s *notificationSuite) TestUnrecordedDeliveryIsRecordedByTheWorkflow() {
	s.recordAs(contract.StatusPending)
	res := delivered()
	res.Unrecorded = true
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(res, nil).Once()
	s.env.ExecuteWorkflow(contract.WorkflowNotification)

	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(&res.DeliveredAt, st.DeliveredAt)
	s.Require().Len(s.updates, 1)
	s.Equal(contract.StatusDelivered, s.updates[0].Status)
	s.Equal(res.DeliveredAt, s.updates[0].DeliveredAt)
	s.Equal(res.ResolvedTargets, s.updates[0].ResolvedTargets)
	s.Equal([]string{"Delivered"}, s.statusAttrs)
	s.env.AssertNumberOfCalls(s.T(), nameOf(notificationActs.DeliverNotification), 1)
}

// An attempt that outlives its timeout (a hung SMTP server) is a transient
// failure: Retrying, not Parked.
func (s *notificationSuite) TestAttemptTimeoutIsTransient() {
	short := contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: 50 * time.Millisecond}
	s.recordWith(contract.StatusPending, short)
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
			if in.Attempt == 1 {
				<-ctx.Done() // hangs until StartToClose expires
				return contract.DeliverNotificationResult{}, ctx.Err()
			}
			return delivered(), nil
		})
	s.env.ExecuteWorkflow(contract.WorkflowNotification)

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Equal([]contract.Status{contract.StatusRetrying}, s.statuses())
	s.Contains(s.updates[0].LastError, "timed out")
	s.Equal([]string{"Retrying", "Delivered"}, s.statusAttrs)
}

// An attempt that sent the email and marked the row Delivered, but whose
// completion was lost (its worker died after the send), times out; the
// Retrying update then finds the row Delivered, and the workflow ends
// Delivered with the row's times and recipients, sending nothing again.
func (s *notificationSuite) TestLostCompletionAdoptsTheDeliveredRow() {
	short := contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: 50 * time.Millisecond}
	s.recordWith(contract.StatusPending, short)
	at := time.Date(2026, 11, 22, 1, 0, 5, 0, time.UTC)
	s.rowNow = &contract.NotificationState{NotificationID: sub.NotificationID, Status: contract.StatusDelivered,
		DeliveredAt: &at, LastAttemptAt: &at, ResolvedTargets: []string{"ops@example.com"}}
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
			<-ctx.Done() // the completion never arrives
			return contract.DeliverNotificationResult{}, ctx.Err()
		}).Once()
	s.env.ExecuteWorkflow(contract.WorkflowNotification)

	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(&at, st.DeliveredAt)
	s.Equal([]string{"ops@example.com"}, st.ResolvedTargets)
	s.Equal(contract.StatusDelivered, s.queryStatus().Status)
	s.Equal([]string{"Delivered"}, s.statusAttrs)
	s.env.AssertNumberOfCalls(s.T(), nameOf(notificationActs.DeliverNotification), 1)
}

// With max_retries 0 the first attempt (central's, there is no site-side
// one) is the only one: a transient failure parks at once.
func (s *notificationSuite) TestNoRetriesAllowedParksAfterTheFirstAttempt() {
	s.recordWith(contract.StatusPending, contract.RetryPolicy{Interval: time.Minute, AttemptTimeout: time.Minute})
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		contract.DeliverNotificationResult{}, transient)
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{}) }, time.Hour)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)

	s.Equal(contract.StatusDiscarded, s.result().Status)
	s.env.AssertNumberOfCalls(s.T(), nameOf(notificationActs.DeliverNotification), 1)
	s.Equal([]contract.Status{contract.StatusParked, contract.StatusDiscarded}, s.statuses())
	s.Equal(0, s.updates[0].RetryCount)
	s.Equal("retries exhausted (0): "+transient.Error(), s.updates[0].LastError)
}

func (s *notificationSuite) TestPermanentFailureParksAtOnceThenDiscard() {
	s.recordAs(contract.StatusPending)
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		contract.DeliverNotificationResult{},
		temporal.NewNonRetryableApplicationError(`notification list "nope" is not defined`, contract.ErrTypeUnknownList, nil)).Once()
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{})
	}, time.Hour)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
	st := s.result()
	s.Equal(contract.StatusDiscarded, st.Status)
	s.Equal([]contract.Status{contract.StatusParked, contract.StatusDiscarded}, s.statuses())
	s.Contains(s.updates[0].LastError, `permanent failure: notification list "nope" is not defined`)
}

func (s *notificationSuite) TestTerminalRowIsNeverDeliveredAgain() {
	s.recordAs(contract.StatusDelivered)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
	s.Equal(contract.StatusDelivered, s.result().Status)
	s.env.AssertNotCalled(s.T(), nameOf(notificationActs.DeliverNotification), mock.Anything, mock.Anything)
}

func (s *notificationSuite) TestDuplicateSubmitIsIgnored() {
	s.recordAs(contract.StatusPending)
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
			return contract.DeliverNotificationResult{}, transient
		}).Once()
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(delivered(), nil).Once()
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalSubmit, sub) }, 30*time.Second)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
	s.Equal(contract.StatusDelivered, s.result().Status)
	s.env.AssertNumberOfCalls(s.T(), nameOf(notificationActs.RecordNotification), 1)
	s.env.AssertNumberOfCalls(s.T(), nameOf(notificationActs.DeliverNotification), 2)
}

func (s *notificationSuite) TestRetrySentBeforeParkingIsIgnored() {
	s.recordAs(contract.StatusPending)
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		contract.DeliverNotificationResult{}, transient)
	// A retry sent while it is still Retrying must not un-park it later.
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{}) }, 30*time.Second)
	s.env.RegisterDelayedCallback(func() {
		s.Equal(contract.StatusParked, s.queryStatus().Status)
		s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{Operator: "bo"})
	}, time.Hour)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
	s.Equal(contract.StatusDiscarded, s.result().Status)
	s.env.AssertNumberOfCalls(s.T(), nameOf(notificationActs.DeliverNotification), policy.MaxRetries+1)
}

func TestAfterFailedAttempt(t *testing.T) {
	cases := []struct {
		retryCount, maxRetries int
		permanent              bool
		want                   contract.Status
	}{
		{0, 3, false, contract.StatusRetrying},
		{2, 3, false, contract.StatusRetrying},
		{3, 3, false, contract.StatusParked},
		{0, 0, false, contract.StatusParked},
		{0, 3, true, contract.StatusParked},
	}
	for _, c := range cases {
		require.Equal(t, c.want, contract.AfterFailedAttempt(c.retryCount, c.maxRetries, c.permanent), "%+v", c)
	}
}

// The status query answers Pending, with the id and the site's time, from
// the workflow's first moment: before the central row is written (here the
// store is briefly down) it answered a zero state.
func (s *notificationSuite) TestStatusIsPendingBeforeTheRowIsRecorded() {
	s.env.OnActivity(notificationActs.RecordNotification, mock.Anything, sub).Return(
		contract.RecordNotificationResult{}, errStoreDown).Once()
	s.recordAs(contract.StatusPending)
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(delivered(), nil)
	var early contract.NotificationState
	s.env.RegisterDelayedCallback(func() { early = s.queryStatus() }, 500*time.Millisecond)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Equal(contract.StatusPending, early.Status)
	s.Equal(sub.NotificationID, early.NotificationID)
	s.Equal(sub.SiteEnqueuedAt, early.SiteEnqueuedAt)
}

// A cancel request (the Web UI's Cancel) is a discard: parked or between
// retries, the notification ends Discarded on its row, audited as an
// operator action, and the workflow completes instead of leaving the row
// Parked or Retrying with nothing to act on it.
func (s *notificationSuite) TestCancelIsADiscard() {
	for _, tc := range []struct {
		name     string
		cancelAt time.Duration
		want     []contract.Status
	}{
		{"parked", time.Hour, []contract.Status{contract.StatusRetrying, contract.StatusRetrying, contract.StatusParked, contract.StatusDiscarded}},
		{"retrying", 90 * time.Second, []contract.Status{contract.StatusRetrying, contract.StatusRetrying, contract.StatusDiscarded}},
	} {
		s.Run(tc.name, func() {
			s.SetupTest()
			s.recordAs(contract.StatusPending)
			s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
				contract.DeliverNotificationResult{}, transient)
			s.env.RegisterDelayedCallback(s.env.CancelWorkflow, tc.cancelAt)
			s.env.ExecuteWorkflow(contract.WorkflowNotification)

			st := s.result()
			s.Equal(contract.StatusDiscarded, st.Status)
			s.Require().NotNil(st.LastOperatorAction)
			s.Contains(st.LastOperatorAction.Reason, "workflow cancelled")
			s.Equal(tc.want, s.statuses())
			last := s.updates[len(s.updates)-1]
			s.Require().NotNil(last.OperatorAction, "audited as an operator action")
			s.Equal(1, last.OperatorSeq)
			s.Equal("Discarded", s.statusAttrs[len(s.statusAttrs)-1])
		})
	}
}

// While parked, the workflow's current details (the Web UI's workflow
// page) say why it waits and what to send; after the retry they are gone.
func (s *notificationSuite) TestParkedDetailsSayWhy() {
	s.recordAs(contract.StatusPending)
	calls := 0
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(
		func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
			calls++
			if calls <= 3 {
				return contract.DeliverNotificationResult{}, transient
			}
			return delivered(), nil
		})
	var parked, after string
	s.env.RegisterDelayedCallback(func() {
		parked = s.currentDetails()
		s.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{})
	}, time.Hour)
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
	after = s.currentDetails()

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Contains(parked, "Parked: retries exhausted (2): "+transient.Error())
	s.Contains(parked, "Send signal retry")
	s.Empty(after)
}

// currentDetails is what the Web UI shows as the workflow's details.
func (s *notificationSuite) currentDetails() string {
	v, err := s.env.QueryWorkflow("__temporal_workflow_metadata")
	s.Require().NoError(err)
	var md sdkpb.WorkflowMetadata
	s.Require().NoError(v.Get(&md))
	return md.GetCurrentDetails()
}
