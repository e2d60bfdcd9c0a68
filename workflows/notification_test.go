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
	"github.com/outpost-dev/outpost/workflows"
)

type notificationSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env     *testsuite.TestWorkflowEnvironment
	updates []workflows.NotificationUpdate
	// statusAttrs is every OutpostStatus value the workflow upserted, in order.
	statusAttrs []string
	// storeBackAt is when UpdateNotification stops failing (zero: it never fails);
	// storeFailures counts the writes it failed.
	storeBackAt   time.Time
	storeFailures int
	// rowNow, when set, is the central row's terminal state: every update
	// is refused with TerminalRow, as the store does.
	rowNow *workflows.NotificationState
}

func TestNotificationWorkflow(t *testing.T) { suite.Run(t, new(notificationSuite)) }

var policy = workflows.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: time.Minute}

var sub = workflows.NotificationSubmission{
	NotificationID: "0b0f6a43-7a3c-4c55-9d0c-2f0e8a9c8f11", ListName: "ops", Subject: "Pump 3 tripped",
	Body: "Pressure low", SourceSiteID: "plant-1", SiteEnqueuedAt: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC),
}

func (s *notificationSuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterWorkflowWithOptions(workflows.NotificationWorkflow, workflow.RegisterOptions{Name: "NotificationWorkflow"})
	s.env.RegisterActivity(&activities.NotificationActivities{})
	s.updates, s.statusAttrs, s.storeBackAt, s.storeFailures, s.rowNow = nil, nil, time.Time{}, 0, nil
	s.env.OnActivity(workflows.ActivityUpdateNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, u workflows.NotificationUpdate) error {
			if s.rowNow != nil {
				return temporal.NewNonRetryableApplicationError("notification is terminal", workflows.ErrTypeTerminalRow, nil, *s.rowNow)
			}
			if s.env.Now().Before(s.storeBackAt) {
				s.storeFailures++
				return errStoreDown
			}
			s.updates = append(s.updates, u)
			return nil
		})
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(workflows.AttrStatus); ok {
			s.statusAttrs = append(s.statusAttrs, v)
		}
	}).Return(nil)
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(workflows.SignalSubmit, sub) }, 0)
}

var errStoreDown = errors.New("update notification: dial tcp 10.0.0.5:1433: connection refused")

func (s *notificationSuite) recordAs(status workflows.Status) { s.recordWith(status, policy) }

func (s *notificationSuite) recordWith(status workflows.Status, p workflows.RetryPolicy) {
	s.env.OnActivity(workflows.ActivityRecordNotification, mock.Anything, sub).Return(
		workflows.RecordNotificationResult{
			State:  workflows.NotificationState{NotificationID: sub.NotificationID, Status: status},
			Policy: p,
		}, nil).Once()
}

func delivered() workflows.DeliverNotificationResult {
	return workflows.DeliverNotificationResult{DeliveredAt: time.Now().UTC(), ResolvedTargets: []string{"ops@example.com"}}
}

var transient = errors.New("dial tcp 127.0.0.1:2525: connection refused")

func (s *notificationSuite) result() workflows.NotificationState {
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var st workflows.NotificationState
	s.Require().NoError(s.env.GetWorkflowResult(&st))
	return st
}

func (s *notificationSuite) statuses() []workflows.Status {
	out := make([]workflows.Status, len(s.updates))
	for i, u := range s.updates {
		out[i] = u.Status
	}
	return out
}

func (s *notificationSuite) queryStatus() workflows.NotificationState {
	return queryStatusAs[workflows.NotificationState](s.T(), s.env)
}

// queryStatusAs is the answer of the workflow's status query, decoded as T.
func queryStatusAs[T any](t require.TestingT, env *testsuite.TestWorkflowEnvironment) T {
	v, err := env.QueryWorkflow(workflows.QueryStatus)
	require.NoError(t, err)
	var st T
	require.NoError(t, v.Get(&st))
	return st
}

func (s *notificationSuite) TestDeliveredOnFirstAttempt() {
	s.recordAs(workflows.StatusPending)
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(delivered(), nil).Once()
	s.env.ExecuteWorkflow("NotificationWorkflow")
	st := s.result()
	s.Equal(workflows.StatusDelivered, st.Status)
	s.Equal(0, st.RetryCount)
	s.Equal([]string{"ops@example.com"}, st.ResolvedTargets)
	s.Empty(s.updates, "a first-try delivery needs no status writes besides the delivery itself")
}

func (s *notificationSuite) TestTransientFailuresRetryAtFixedInterval() {
	s.recordAs(workflows.StatusPending)
	var attemptTimes []time.Time
	call := 0
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in workflows.DeliverNotificationInput) (workflows.DeliverNotificationResult, error) {
			attemptTimes = append(attemptTimes, s.env.Now())
			s.Equal(call, in.RetryCount)
			call++
			if call <= 2 {
				return workflows.DeliverNotificationResult{}, transient
			}
			return delivered(), nil
		}).Times(3)
	s.env.ExecuteWorkflow("NotificationWorkflow")
	st := s.result()
	s.Equal(workflows.StatusDelivered, st.Status)
	s.Equal(2, st.RetryCount)
	s.Equal([]workflows.Status{workflows.StatusRetrying, workflows.StatusRetrying}, s.statuses())
	s.Contains(s.updates[0].LastError, "connection refused")
	s.Require().NotNil(s.updates[0].NextAttemptAt)
	s.Require().Len(attemptTimes, 3)
	s.Equal(policy.Interval, attemptTimes[1].Sub(attemptTimes[0]))
	s.Equal(policy.Interval, attemptTimes[2].Sub(attemptTimes[1]))
	s.Equal([]string{"Retrying", "Retrying", "Delivered"}, s.statusAttrs)
}

func (s *notificationSuite) TestExhaustedRetriesParkThenRetryDelivers() {
	s.recordAs(workflows.StatusPending)
	failing := true
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ workflows.DeliverNotificationInput) (workflows.DeliverNotificationResult, error) {
			if failing {
				return workflows.DeliverNotificationResult{}, transient
			}
			return delivered(), nil
		})
	// Attempts at 0, 1m, 2m, then parked; the operator retries at 1h.
	s.env.RegisterDelayedCallback(func() {
		st := s.queryStatus()
		s.Equal(workflows.StatusParked, st.Status)
		s.Equal(policy.MaxRetries, st.RetryCount)
		s.Contains(st.LastError, "retries exhausted (2)")
		failing = false
		s.env.SignalWorkflow(workflows.SignalRetry, workflows.OperatorAction{Operator: "ana", Reason: "relay fixed"})
	}, time.Hour)
	s.env.ExecuteWorkflow("NotificationWorkflow")
	st := s.result()
	s.Equal(workflows.StatusDelivered, st.Status)
	s.Equal(0, st.RetryCount, "retry resets the retry count")
	s.Equal(&workflows.OperatorAction{Operator: "ana", Reason: "relay fixed"}, st.LastOperatorAction)
	s.Equal([]workflows.Status{workflows.StatusRetrying, workflows.StatusRetrying, workflows.StatusParked, workflows.StatusPending}, s.statuses())
	s.Equal([]string{"Retrying", "Retrying", "Parked", "Pending", "Delivered"}, s.statusAttrs)
}

// The central store down for minutes (the site already deleted its buffer
// row) delays the notification; it neither fails nor strands it. Four
// minutes, eight times what a store write survived before: the test
// environment gives up an activity's unlimited retries after ten attempts
// (about four and a half minutes here), the server never does.
func (s *notificationSuite) TestStoreOutageDelaysButNeverStrands() {
	t0 := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	s.env.SetStartTime(t0)
	s.storeBackAt = t0.Add(4 * time.Minute)
	s.recordAs(workflows.StatusPending)
	var attemptTimes []time.Time
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in workflows.DeliverNotificationInput) (workflows.DeliverNotificationResult, error) {
			attemptTimes = append(attemptTimes, s.env.Now())
			if in.Attempt == 1 {
				return workflows.DeliverNotificationResult{}, transient
			}
			return delivered(), nil
		})
	s.env.ExecuteWorkflow("NotificationWorkflow")

	st := s.result()
	s.Equal(workflows.StatusDelivered, st.Status)
	s.Equal([]workflows.Status{workflows.StatusRetrying}, s.statuses(), "the Retrying write went through once the store was back")
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
	s.recordAs(workflows.StatusPending)
	res := delivered()
	res.Unrecorded = true
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(res, nil).Once()
	s.env.ExecuteWorkflow("NotificationWorkflow")

	st := s.result()
	s.Equal(workflows.StatusDelivered, st.Status)
	s.Equal(&res.DeliveredAt, st.DeliveredAt)
	s.Require().Len(s.updates, 1)
	s.Equal(workflows.StatusDelivered, s.updates[0].Status)
	s.Equal(res.DeliveredAt, s.updates[0].DeliveredAt)
	s.Equal(res.ResolvedTargets, s.updates[0].ResolvedTargets)
	s.Equal([]string{"Delivered"}, s.statusAttrs)
	s.env.AssertNumberOfCalls(s.T(), workflows.ActivityDeliverNotification, 1)
}

// An attempt that outlives its timeout (a hung SMTP server) is a transient
// failure: Retrying, not Parked.
func (s *notificationSuite) TestAttemptTimeoutIsTransient() {
	short := workflows.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: 50 * time.Millisecond}
	s.recordWith(workflows.StatusPending, short)
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in workflows.DeliverNotificationInput) (workflows.DeliverNotificationResult, error) {
			if in.Attempt == 1 {
				<-ctx.Done() // hangs until StartToClose expires
				return workflows.DeliverNotificationResult{}, ctx.Err()
			}
			return delivered(), nil
		})
	s.env.ExecuteWorkflow("NotificationWorkflow")

	s.Equal(workflows.StatusDelivered, s.result().Status)
	s.Equal([]workflows.Status{workflows.StatusRetrying}, s.statuses())
	s.Contains(s.updates[0].LastError, "timed out")
	s.Equal([]string{"Retrying", "Delivered"}, s.statusAttrs)
}

// An attempt that sent the email and marked the row Delivered, but whose
// completion was lost (its worker died after the send), times out; the
// Retrying update then finds the row Delivered, and the workflow ends
// Delivered with the row's times and recipients, sending nothing again.
func (s *notificationSuite) TestLostCompletionAdoptsTheDeliveredRow() {
	short := workflows.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: 50 * time.Millisecond}
	s.recordWith(workflows.StatusPending, short)
	at := time.Date(2026, 11, 22, 1, 0, 5, 0, time.UTC)
	s.rowNow = &workflows.NotificationState{NotificationID: sub.NotificationID, Status: workflows.StatusDelivered,
		DeliveredAt: &at, LastAttemptAt: &at, ResolvedTargets: []string{"ops@example.com"}}
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ workflows.DeliverNotificationInput) (workflows.DeliverNotificationResult, error) {
			<-ctx.Done() // the completion never arrives
			return workflows.DeliverNotificationResult{}, ctx.Err()
		}).Once()
	s.env.ExecuteWorkflow("NotificationWorkflow")

	st := s.result()
	s.Equal(workflows.StatusDelivered, st.Status)
	s.Equal(&at, st.DeliveredAt)
	s.Equal([]string{"ops@example.com"}, st.ResolvedTargets)
	s.Equal(workflows.StatusDelivered, s.queryStatus().Status)
	s.Equal([]string{"Delivered"}, s.statusAttrs)
	s.env.AssertNumberOfCalls(s.T(), workflows.ActivityDeliverNotification, 1)
}

// With max_retries 0 the first attempt (central's, there is no site-side
// one) is the only one: a transient failure parks at once.
func (s *notificationSuite) TestNoRetriesAllowedParksAfterTheFirstAttempt() {
	s.recordWith(workflows.StatusPending, workflows.RetryPolicy{Interval: time.Minute, AttemptTimeout: time.Minute})
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		workflows.DeliverNotificationResult{}, transient)
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(workflows.SignalDiscard, workflows.OperatorAction{}) }, time.Hour)
	s.env.ExecuteWorkflow("NotificationWorkflow")

	s.Equal(workflows.StatusDiscarded, s.result().Status)
	s.env.AssertNumberOfCalls(s.T(), workflows.ActivityDeliverNotification, 1)
	s.Equal([]workflows.Status{workflows.StatusParked, workflows.StatusDiscarded}, s.statuses())
	s.Equal(0, s.updates[0].RetryCount)
	s.Equal("retries exhausted (0): "+transient.Error(), s.updates[0].LastError)
}

func (s *notificationSuite) TestPermanentFailureParksAtOnceThenDiscard() {
	s.recordAs(workflows.StatusPending)
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		workflows.DeliverNotificationResult{},
		temporal.NewNonRetryableApplicationError(`notification list "nope" is not defined`, workflows.ErrTypeUnknownList, nil)).Once()
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(workflows.SignalDiscard, workflows.OperatorAction{})
	}, time.Hour)
	s.env.ExecuteWorkflow("NotificationWorkflow")
	st := s.result()
	s.Equal(workflows.StatusDiscarded, st.Status)
	s.Equal([]workflows.Status{workflows.StatusParked, workflows.StatusDiscarded}, s.statuses())
	s.Contains(s.updates[0].LastError, `permanent failure: notification list "nope" is not defined`)
}

func (s *notificationSuite) TestTerminalRowIsNeverDeliveredAgain() {
	s.recordAs(workflows.StatusDelivered)
	s.env.ExecuteWorkflow("NotificationWorkflow")
	s.Equal(workflows.StatusDelivered, s.result().Status)
	s.env.AssertNotCalled(s.T(), workflows.ActivityDeliverNotification, mock.Anything, mock.Anything)
}

func (s *notificationSuite) TestDuplicateSubmitIsIgnored() {
	s.recordAs(workflows.StatusPending)
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, _ workflows.DeliverNotificationInput) (workflows.DeliverNotificationResult, error) {
			return workflows.DeliverNotificationResult{}, transient
		}).Once()
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(delivered(), nil).Once()
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(workflows.SignalSubmit, sub) }, 30*time.Second)
	s.env.ExecuteWorkflow("NotificationWorkflow")
	s.Equal(workflows.StatusDelivered, s.result().Status)
	s.env.AssertNumberOfCalls(s.T(), workflows.ActivityRecordNotification, 1)
	s.env.AssertNumberOfCalls(s.T(), workflows.ActivityDeliverNotification, 2)
}

func (s *notificationSuite) TestRetrySentBeforeParkingIsIgnored() {
	s.recordAs(workflows.StatusPending)
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		workflows.DeliverNotificationResult{}, transient)
	// A retry sent while it is still Retrying must not un-park it later.
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(workflows.SignalRetry, workflows.OperatorAction{}) }, 30*time.Second)
	s.env.RegisterDelayedCallback(func() {
		s.Equal(workflows.StatusParked, s.queryStatus().Status)
		s.env.SignalWorkflow(workflows.SignalDiscard, workflows.OperatorAction{Operator: "bo"})
	}, time.Hour)
	s.env.ExecuteWorkflow("NotificationWorkflow")
	s.Equal(workflows.StatusDiscarded, s.result().Status)
	s.env.AssertNumberOfCalls(s.T(), workflows.ActivityDeliverNotification, policy.MaxRetries+1)
}

func TestAfterFailedAttempt(t *testing.T) {
	cases := []struct {
		retryCount, maxRetries int
		permanent              bool
		want                   workflows.Status
	}{
		{0, 3, false, workflows.StatusRetrying},
		{2, 3, false, workflows.StatusRetrying},
		{3, 3, false, workflows.StatusParked},
		{0, 0, false, workflows.StatusParked},
		{0, 3, true, workflows.StatusParked},
	}
	for _, c := range cases {
		require.Equal(t, c.want, workflows.AfterFailedAttempt(c.retryCount, c.maxRetries, c.permanent), "%+v", c)
	}
}

// The status query answers Pending, with the id and the site's time, from
// the workflow's first moment: before the central row is written (here the
// store is briefly down) it answered a zero state.
func (s *notificationSuite) TestStatusIsPendingBeforeTheRowIsRecorded() {
	s.env.OnActivity(workflows.ActivityRecordNotification, mock.Anything, sub).Return(
		workflows.RecordNotificationResult{}, errStoreDown).Once()
	s.recordAs(workflows.StatusPending)
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(delivered(), nil)
	var early workflows.NotificationState
	s.env.RegisterDelayedCallback(func() { early = s.queryStatus() }, 500*time.Millisecond)
	s.env.ExecuteWorkflow("NotificationWorkflow")

	s.Equal(workflows.StatusDelivered, s.result().Status)
	s.Equal(workflows.StatusPending, early.Status)
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
		want     []workflows.Status
	}{
		{"parked", time.Hour, []workflows.Status{workflows.StatusRetrying, workflows.StatusRetrying, workflows.StatusParked, workflows.StatusDiscarded}},
		{"retrying", 90 * time.Second, []workflows.Status{workflows.StatusRetrying, workflows.StatusRetrying, workflows.StatusDiscarded}},
	} {
		s.Run(tc.name, func() {
			s.SetupTest()
			s.recordAs(workflows.StatusPending)
			s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
				workflows.DeliverNotificationResult{}, transient)
			s.env.RegisterDelayedCallback(s.env.CancelWorkflow, tc.cancelAt)
			s.env.ExecuteWorkflow("NotificationWorkflow")

			st := s.result()
			s.Equal(workflows.StatusDiscarded, st.Status)
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
	s.recordAs(workflows.StatusPending)
	calls := 0
	s.env.OnActivity(workflows.ActivityDeliverNotification, mock.Anything, mock.Anything).Return(
		func(context.Context, workflows.DeliverNotificationInput) (workflows.DeliverNotificationResult, error) {
			calls++
			if calls <= 3 {
				return workflows.DeliverNotificationResult{}, transient
			}
			return delivered(), nil
		})
	var parked, after string
	s.env.RegisterDelayedCallback(func() {
		parked = s.currentDetails()
		s.env.SignalWorkflow(workflows.SignalRetry, workflows.OperatorAction{})
	}, time.Hour)
	s.env.ExecuteWorkflow("NotificationWorkflow")
	after = s.currentDetails()

	s.Equal(workflows.StatusDelivered, s.result().Status)
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
