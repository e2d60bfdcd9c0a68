package notification_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/workflowtest"
	"github.com/outpost-dev/outpost/notification"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// notificationActs are the activities the tests mock, by method value as
// the workflow calls them.
var notificationActs *notification.Activities

type notificationSuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	// generation is the generation of the central worker that starts the
	// notification (see operation.WorkerBuildID): 4 makes the first attempt
	// a local activity, 2 and 3 an ordinary activity, and 1 takes the path
	// of the workflows started before the first attempt recorded the
	// central row: a local activity records it first.
	generation int
	// firstAttempts are the kinds ("local" or "activity") in which
	// RecordAndDeliverNotification started, in order.
	firstAttempts []string
	// started runs the notification a site started with its submission as
	// the input (WorkflowNotificationStarted) instead of signalling it.
	started bool
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
	// records are the central row's answers to recording it, in turn (the
	// last one stands), and recorded counts the records that succeeded.
	// Before recordBackAt every record fails (zero: none does).
	records      []recordAnswer
	recorded     int
	recordBackAt time.Time
	// deliver is the delivery attempt; attempts are its inputs, in order.
	deliver  func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error)
	attempts []contract.DeliverNotificationInput
}

// recordAnswer is one answer of the store to recording the row.
type recordAnswer struct {
	res contract.RecordNotificationResult
	err error
}

// TestNotificationWorkflow runs the suite on today's code, whose first
// attempt records the central row, as a local activity.
func TestNotificationWorkflow(t *testing.T) { suite.Run(t, &notificationSuite{generation: 4}) }

// TestNotificationWorkflowStarted runs it as a site starts it when every
// central worker is of generation 3 or later: the submission is the input,
// no signal carries it.
func TestNotificationWorkflowStarted(t *testing.T) {
	suite.Run(t, &notificationSuite{generation: 4, started: true})
}

// TestNotificationWorkflowGeneration3 runs it on the path of the
// notifications a worker of generation 3 started, which keep it: the
// first attempt is an ordinary activity.
func TestNotificationWorkflowGeneration3(t *testing.T) {
	suite.Run(t, &notificationSuite{generation: 3, started: true})
}

// TestNotificationWorkflowRecordingFirst runs it on the path the workflows
// started before generation 2 keep: a local activity records the row, then
// the attempts.
func TestNotificationWorkflowRecordingFirst(t *testing.T) {
	suite.Run(t, &notificationSuite{generation: 1})
}

var policy = contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: time.Minute}

var sub = contract.NotificationSubmission{
	NotificationID: "0b0f6a43-7a3c-4c55-9d0c-2f0e8a9c8f11", ListName: "ops", Subject: "Pump 3 tripped",
	Body: "Pressure low", SourceSiteID: "plant-1", SiteEnqueuedAt: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC),
}

// newNotificationEnv is a test environment with both notification
// workflows on a worker of generation whose attempts take up to timeout.
func newNotificationEnv(ts *testsuite.WorkflowTestSuite, timeout time.Duration, generation int) *testsuite.TestWorkflowEnvironment {
	env := ts.NewTestWorkflowEnvironment()
	run, runStarted := notification.Workflow{AttemptTimeout: timeout}.AsGeneration(generation)
	env.RegisterWorkflowWithOptions(run, workflow.RegisterOptions{Name: contract.WorkflowNotification})
	env.RegisterWorkflowWithOptions(runStarted, workflow.RegisterOptions{Name: contract.WorkflowNotificationStarted})
	env.RegisterActivity(&notification.Activities{})
	if generation < 2 { // after registering: the environment refuses a workflow registered after a mock
		env.OnGetVersion(mock.Anything, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	}
	return env
}

func (s *notificationSuite) SetupTest() {
	s.setup(policy.AttemptTimeout)
}

// setup starts each test afresh with a worker whose attempts take up to timeout.
func (s *notificationSuite) setup(timeout time.Duration) {
	s.env = newNotificationEnv(&s.WorkflowTestSuite, timeout, s.generation)
	s.firstAttempts = nil
	s.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) {
		if info.ActivityType.Name == "RecordAndDeliverNotification" {
			s.firstAttempts = append(s.firstAttempts, "local")
		}
	})
	s.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		if info.ActivityType.Name == "RecordAndDeliverNotification" {
			s.firstAttempts = append(s.firstAttempts, "activity")
		}
	})
	s.updates, s.statusAttrs, s.storeBackAt, s.storeFailures, s.rowNow = nil, nil, time.Time{}, 0, nil
	s.records, s.recorded, s.recordBackAt, s.deliver, s.attempts = nil, 0, time.Time{}, nil, nil
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
	s.env.OnActivity(notificationActs.RecordNotification, mock.Anything, sub).Return(
		func(context.Context, contract.NotificationSubmission) (contract.RecordNotificationResult, error) {
			return s.record()
		})
	s.env.OnActivity(notificationActs.DeliverNotification, mock.Anything, mock.Anything).Return(s.attempt)
	s.env.OnActivity(notificationActs.RecordAndDeliverNotification, mock.Anything, mock.Anything).Return(s.recordAndDeliver)
	s.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		if v, ok := args.Get(0).(temporal.SearchAttributes).GetKeyword(temporalcontract.AttrStatus); ok {
			s.statusAttrs = append(s.statusAttrs, v)
		}
	}).Return(nil)
	if !s.started {
		s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalSubmit, sub) }, 0)
	}
}

// execute runs the notification the suite names: signalled its submission,
// or started with it.
func (s *notificationSuite) execute() {
	if s.started {
		s.env.ExecuteWorkflow(contract.WorkflowNotificationStarted, sub)
		return
	}
	s.env.ExecuteWorkflow(contract.WorkflowNotification)
}

// TearDownTest checks that each test ran the path its suite's generation
// names: the first attempt records the row, as a local activity from
// generation 4, or (before generation 2) the path GetVersion's
// DefaultVersion takes, where no attempt records it.
func (s *notificationSuite) TearDownTest() {
	switch {
	case s.generation < 2:
		s.Empty(s.firstAttempts)
	case s.generation < 4:
		s.Equal([]string{"activity"}, s.firstAttempts)
	default:
		s.Equal([]string{"local"}, s.firstAttempts)
	}
}

// record is the store's next answer to recording the row.
func (s *notificationSuite) record() (contract.RecordNotificationResult, error) {
	if s.env.Now().Before(s.recordBackAt) {
		return contract.RecordNotificationResult{}, errStoreDown
	}
	s.Require().NotEmpty(s.records, "the test says what the row is")
	a := s.records[0]
	if len(s.records) > 1 {
		s.records = s.records[1:]
	}
	if a.err == nil {
		s.recorded++
	}
	return a.res, a.err
}

func (s *notificationSuite) attempt(ctx context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
	s.Require().NotNil(s.deliver, "the test says how attempts go")
	s.attempts = append(s.attempts, in)
	return s.deliver(ctx, in)
}

// recordAndDeliver is RecordAndDeliverNotification over record and attempt.
func (s *notificationSuite) recordAndDeliver(ctx context.Context, in contract.RecordAndDeliverInput) (contract.RecordAndDeliverResult, error) {
	s.Equal(sub, in.Submission)
	recorded, err := s.record()
	if err != nil {
		return contract.RecordAndDeliverResult{}, temporal.NewApplicationErrorWithCause("record notification", contract.ErrTypeRowUnrecorded, err)
	}
	res := contract.RecordAndDeliverResult{Recorded: recorded}
	if recorded.State.Status != contract.StatusPending {
		return res, nil
	}
	delivery, err := s.attempt(ctx, contract.DeliverNotificationInput{
		NotificationID: recorded.State.NotificationID, RetryCount: recorded.State.RetryCount, Attempt: in.Attempt,
	})
	if err != nil {
		return contract.RecordAndDeliverResult{}, temporalcontract.WithRecorded(err, recorded)
	}
	res.Delivery = &delivery
	return res, nil
}

var errStoreDown = errors.New("update notification: dial tcp 10.0.0.5:1433: connection refused")

func (s *notificationSuite) recordAs(status contract.Status) { s.recordWith(status, policy) }

func (s *notificationSuite) recordWith(status contract.Status, p contract.RetryPolicy) {
	s.records = append(s.records, recordAnswer{res: contract.RecordNotificationResult{
		State:  contract.NotificationState{NotificationID: sub.NotificationID, Status: status},
		Policy: p,
	}})
}

// deliverWith makes every attempt answer res, err.
func (s *notificationSuite) deliverWith(res contract.DeliverNotificationResult, err error) {
	s.deliver = func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		return res, err
	}
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
	return workflowtest.QueryStatus[contract.NotificationState](s.T(), s.env)
}

func (s *notificationSuite) TestDeliveredOnFirstAttempt() {
	s.recordAs(contract.StatusPending)
	s.deliverWith(delivered(), nil)
	s.execute()
	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(0, st.RetryCount)
	s.Equal([]string{"ops@example.com"}, st.ResolvedTargets)
	s.Empty(s.updates, "a first-try delivery needs no status writes besides the delivery itself")
	s.Len(s.attempts, 1)
	s.Equal(1, s.recorded)
	s.Equal([]string{"Delivered"}, s.statusAttrs)
}

func (s *notificationSuite) TestTransientFailuresRetryAtFixedInterval() {
	s.recordAs(contract.StatusPending)
	var attemptTimes []time.Time
	s.deliver = func(_ context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		attemptTimes = append(attemptTimes, s.env.Now())
		s.Equal(len(attemptTimes)-1, in.RetryCount)
		if len(attemptTimes) <= 2 {
			return contract.DeliverNotificationResult{}, transient
		}
		return delivered(), nil
	}
	s.execute()
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
	s.Equal(1, s.recorded, "the failed first attempt carries the recorded row")
}

func (s *notificationSuite) TestExhaustedRetriesParkThenRetryDelivers() {
	s.recordAs(contract.StatusPending)
	failing := true
	s.deliver = func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		if failing {
			return contract.DeliverNotificationResult{}, transient
		}
		return delivered(), nil
	}
	// Attempts at 0, 1m, 2m, then parked; the operator retries at 1h.
	s.env.RegisterDelayedCallback(func() {
		st := s.queryStatus()
		s.Equal(contract.StatusParked, st.Status)
		s.Equal(policy.MaxRetries, st.RetryCount)
		s.Contains(st.LastError, "retries exhausted (2)")
		failing = false
		s.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "relay fixed"})
	}, time.Hour)
	s.execute()
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
	t0 := centralT0.Add(time.Hour)
	s.env.SetStartTime(t0)
	s.storeBackAt = t0.Add(4 * time.Minute)
	s.recordAs(contract.StatusPending)
	var attemptTimes []time.Time
	s.deliver = func(_ context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		attemptTimes = append(attemptTimes, s.env.Now())
		if in.Attempt == 1 {
			return contract.DeliverNotificationResult{}, transient
		}
		return delivered(), nil
	}
	s.execute()

	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal([]contract.Status{contract.StatusRetrying}, s.statuses(), "the Retrying write went through once the store was back")
	s.Positive(s.storeFailures, "the store was down")
	s.Require().Len(attemptTimes, 2, "no attempt is made or repeated while the store is away")
	s.False(attemptTimes[1].Before(s.storeBackAt.Add(policy.Interval)),
		"the retry waits its interval after the Retrying write, at %s", attemptTimes[1])
	s.Equal([]string{"Retrying", "Delivered"}, s.statusAttrs)
}

// The central store down when the notification arrives: the row is
// recorded once the store is back, and only then is the notification
// delivered, Pending to Delivered as ever (the first attempt that could not
// record it attempted nothing). Four minutes: as above.
func (s *notificationSuite) TestStoreOutageAtArrivalDelaysButNeverStrands() {
	t0 := centralT0.Add(time.Hour)
	s.env.SetStartTime(t0)
	s.recordBackAt = t0.Add(4 * time.Minute)
	s.recordAs(contract.StatusPending)
	var attemptTimes []time.Time
	s.deliver = func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		attemptTimes = append(attemptTimes, s.env.Now())
		return delivered(), nil
	}
	s.execute()

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Equal(1, s.recorded)
	s.Require().Len(attemptTimes, 1, "one attempt, once the row is recorded")
	s.False(attemptTimes[0].Before(s.recordBackAt), "attempted at %s, before the row was recorded", attemptTimes[0])
	s.Empty(s.updates, "no status write: Pending, then Delivered by the attempt")
	s.Equal([]string{"Delivered"}, s.statusAttrs)
}

// A delivery whose activity could not mark the row (the email went out)
// is recorded by the workflow, with its time and recipients, and never
// sent again.
func (s *notificationSuite) TestUnrecordedDeliveryIsRecordedByTheWorkflow() {
	s.recordAs(contract.StatusPending)
	res := delivered()
	res.Unrecorded = true
	s.deliverWith(res, nil)
	s.execute()

	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(&res.DeliveredAt, st.DeliveredAt)
	s.Require().Len(s.updates, 1)
	s.Equal(contract.StatusDelivered, s.updates[0].Status)
	s.Equal(res.DeliveredAt, s.updates[0].DeliveredAt)
	s.Equal(res.ResolvedTargets, s.updates[0].ResolvedTargets)
	s.Equal([]string{"Delivered"}, s.statusAttrs)
	s.Len(s.attempts, 1)
}

// shortAttempts is a worker and a policy whose attempts time out after
// 50 ms, and a Pending row.
func (s *notificationSuite) shortAttempts() {
	short := contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: 50 * time.Millisecond}
	s.setup(short.AttemptTimeout)
	s.recordWith(contract.StatusPending, short)
}

// An attempt that outlives its timeout (a hung SMTP server) is a transient
// failure: Retrying, not Parked.
func (s *notificationSuite) TestAttemptTimeoutIsTransient() {
	s.shortAttempts()
	s.deliver = func(ctx context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		if in.Attempt == 1 {
			<-ctx.Done() // hangs until StartToClose expires
			return contract.DeliverNotificationResult{}, ctx.Err()
		}
		return delivered(), nil
	}
	s.execute()

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Equal([]contract.Status{contract.StatusRetrying}, s.statuses())
	s.Contains(s.updates[0].LastError, "timed out")
	s.Equal(1, s.updates[0].Attempt)
	s.Equal([]string{"Retrying", "Delivered"}, s.statusAttrs)
	s.Len(s.attempts, 2)
}

// An attempt that sent the email and marked the row Delivered, but whose
// completion was lost (its worker died after the send), times out; the
// row, recorded again or refusing the Retrying update, is Delivered, and
// the workflow ends Delivered with the row's times and recipients, sending
// nothing again.
func (s *notificationSuite) TestLostCompletionAdoptsTheDeliveredRow() {
	s.shortAttempts()
	at := time.Date(2026, 11, 22, 1, 0, 5, 0, time.UTC)
	s.rowNow = &contract.NotificationState{NotificationID: sub.NotificationID, Status: contract.StatusDelivered,
		DeliveredAt: &at, LastAttemptAt: &at, ResolvedTargets: []string{"ops@example.com"}}
	s.records = append(s.records, recordAnswer{res: contract.RecordNotificationResult{State: *s.rowNow, Policy: policy}})
	s.deliver = func(ctx context.Context, _ contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		<-ctx.Done() // the completion never arrives
		return contract.DeliverNotificationResult{}, ctx.Err()
	}
	s.execute()

	st := s.result()
	s.Equal(contract.StatusDelivered, st.Status)
	s.Equal(&at, st.DeliveredAt)
	s.Equal([]string{"ops@example.com"}, st.ResolvedTargets)
	s.Equal(contract.StatusDelivered, s.queryStatus().Status)
	s.Equal([]string{"Delivered"}, s.statusAttrs)
	s.Len(s.attempts, 1)
}

// With max_retries 0 the first attempt (central's, there is no site-side
// one) is the only one: a transient failure parks at once.
func (s *notificationSuite) TestNoRetriesAllowedParksAfterTheFirstAttempt() {
	s.recordWith(contract.StatusPending, contract.RetryPolicy{Interval: time.Minute, AttemptTimeout: time.Minute})
	s.deliverWith(contract.DeliverNotificationResult{}, transient)
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{}) }, time.Hour)
	s.execute()

	s.Equal(contract.StatusDiscarded, s.result().Status)
	s.Len(s.attempts, 1)
	s.Equal([]contract.Status{contract.StatusParked, contract.StatusDiscarded}, s.statuses())
	s.Equal(0, s.updates[0].RetryCount)
	s.Equal("retries exhausted (0): "+transient.Error(), s.updates[0].LastError)
}

func (s *notificationSuite) TestPermanentFailureParksAtOnceThenDiscard() {
	s.recordAs(contract.StatusPending)
	s.deliverWith(contract.DeliverNotificationResult{},
		temporal.NewNonRetryableApplicationError(`notification list "nope" is not defined`, contract.ErrTypeUnknownList, nil))
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{})
	}, time.Hour)
	s.execute()
	st := s.result()
	s.Equal(contract.StatusDiscarded, st.Status)
	s.Len(s.attempts, 1)
	s.Equal([]contract.Status{contract.StatusParked, contract.StatusDiscarded}, s.statuses())
	s.Contains(s.updates[0].LastError, `permanent failure: notification list "nope" is not defined`)
}

// A receiver that asks to wait (Retry-After) longer than the interval is
// waited for, on the first attempt as on the others.
func (s *notificationSuite) TestAskedDelayIsWaited() {
	s.recordAs(contract.StatusPending)
	busy := temporal.NewApplicationErrorWithOptions("HTTP 429 Too Many Requests", contract.ErrTypeDeliveryFailed,
		temporal.ApplicationErrorOptions{NextRetryDelay: 5 * time.Minute})
	var attemptTimes []time.Time
	s.deliver = func(_ context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		attemptTimes = append(attemptTimes, s.env.Now())
		if in.Attempt == 1 {
			return contract.DeliverNotificationResult{}, busy
		}
		return delivered(), nil
	}
	s.execute()

	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Require().Len(attemptTimes, 2)
	s.Equal(5*time.Minute, attemptTimes[1].Sub(attemptTimes[0]))
	s.Equal("HTTP 429 Too Many Requests", s.updates[0].LastError)
}

func (s *notificationSuite) TestTerminalRowIsNeverDeliveredAgain() {
	s.recordAs(contract.StatusDelivered)
	s.execute()
	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Empty(s.attempts)
	s.Equal([]string{"Delivered"}, s.statusAttrs)
}

// A row a previous run left Parked starts its cycle again: Pending, then
// delivered.
func (s *notificationSuite) TestEarlierRunsParkedRowIsDeliveredAfresh() {
	s.recordAs(contract.StatusParked)
	s.deliverWith(delivered(), nil)
	s.execute()
	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Equal([]contract.Status{contract.StatusPending}, s.statuses())
	s.Len(s.attempts, 1)
	s.Equal([]string{"Pending", "Delivered"}, s.statusAttrs)
}

// A row left Retrying after one failed attempt (a first workflow task lost
// with its worker after it recorded the attempt) numbers the next attempt
// 2: attempt 1's audit event is stored, and a second attempt 1 would be
// stored as it.
func (s *notificationSuite) TestAttemptsAfterALeftRetryingRowAreNumberedOn() {
	s.records = append(s.records, recordAnswer{res: contract.RecordNotificationResult{
		State:  contract.NotificationState{NotificationID: sub.NotificationID, Status: contract.StatusRetrying, RetryCount: 1},
		Policy: policy,
	}})
	s.deliver = func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		if len(s.attempts) == 1 {
			return contract.DeliverNotificationResult{}, transient
		}
		return delivered(), nil
	}
	s.execute()
	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Require().Len(s.attempts, 2)
	s.Equal(2, s.attempts[0].Attempt)
	s.Equal(3, s.attempts[1].Attempt)
	s.Equal(2, s.updates[1].Attempt, "the failed attempt's event is attempt 2's")
}

func (s *notificationSuite) TestDuplicateSubmitIsIgnored() {
	s.recordAs(contract.StatusPending)
	s.deliver = func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		if len(s.attempts) == 1 {
			return contract.DeliverNotificationResult{}, transient
		}
		return delivered(), nil
	}
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalSubmit, sub) }, 30*time.Second)
	s.execute()
	s.Equal(contract.StatusDelivered, s.result().Status)
	s.Equal(1, s.recorded)
	s.Len(s.attempts, 2)
}

func (s *notificationSuite) TestRetrySentBeforeParkingIsIgnored() {
	s.recordAs(contract.StatusPending)
	s.deliverWith(contract.DeliverNotificationResult{}, transient)
	// A retry sent while it is still Retrying must not un-park it later.
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{}) }, 30*time.Second)
	s.env.RegisterDelayedCallback(func() {
		s.Equal(contract.StatusParked, s.queryStatus().Status)
		s.env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{Operator: "bo"})
	}, time.Hour)
	s.execute()
	s.Equal(contract.StatusDiscarded, s.result().Status)
	s.Len(s.attempts, policy.MaxRetries+1)
}

// The notification workflow numbers its attempts across operator retries and
// hands each failed attempt and operator action to the status update,
// without any extra command.
func (s *notificationSuite) TestUpdatesCarryTheAuditFields() {
	t0 := centralT0
	s.env.SetStartTime(t0)
	s.recordWith(contract.StatusPending, contract.RetryPolicy{Interval: time.Minute, MaxRetries: 1, AttemptTimeout: time.Minute})
	s.deliver = func(_ context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		if in.Attempt == 4 {
			return delivered(), nil
		}
		return contract.DeliverNotificationResult{}, errors.New("connection refused")
	}
	ana := contract.OperatorAction{Operator: "ana", Reason: "relay fixed"}
	s.env.RegisterDelayedCallback(func() { s.env.SignalWorkflow(contract.SignalRetry, ana) }, time.Hour)
	s.execute()
	s.result()

	attempts := make([]int, len(s.attempts))
	for i, in := range s.attempts {
		attempts[i] = in.Attempt
	}
	s.Equal([]int{1, 2, 3, 4}, attempts)
	type audited struct {
		Status   contract.Status
		Attempt  int
		Operator *contract.OperatorAction
		Seq      int
		At       time.Time
	}
	var got []audited
	for _, u := range s.updates {
		s.Equal(sub.SourceSiteID, u.SiteID)
		got = append(got, audited{u.Status, u.Attempt, u.OperatorAction, u.OperatorSeq, u.At})
	}
	s.Equal([]audited{
		{contract.StatusRetrying, 1, nil, 0, t0},
		{contract.StatusParked, 2, nil, 0, t0.Add(time.Minute)},
		{contract.StatusPending, 0, &ana, 1, t0.Add(time.Hour)},
		{contract.StatusRetrying, 3, nil, 0, t0.Add(time.Hour)},
	}, got)
}

// The status query answers Pending, with the id and the site's time, from
// the workflow's first moment: before the central row is written (here the
// store is briefly down) it answered a zero state.
func (s *notificationSuite) TestStatusIsPendingBeforeTheRowIsRecorded() {
	t0 := centralT0
	s.env.SetStartTime(t0)
	s.recordBackAt = t0.Add(2 * time.Second)
	s.recordAs(contract.StatusPending)
	s.deliverWith(delivered(), nil)
	var early contract.NotificationState
	s.env.RegisterDelayedCallback(func() { early = s.queryStatus() }, 500*time.Millisecond)
	s.execute()

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
			s.deliverWith(contract.DeliverNotificationResult{}, transient)
			s.env.RegisterDelayedCallback(s.env.CancelWorkflow, tc.cancelAt)
			s.execute()

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

// A cancel request during the first attempt discards the notification
// too: the row is recorded (the attempt was abandoned before it said so)
// and ends Discarded.
func (s *notificationSuite) TestCancelDuringTheFirstAttemptIsADiscard() {
	s.recordAs(contract.StatusPending)
	s.deliver = func(ctx context.Context, _ contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		s.env.CancelWorkflow() // the operator cancels while the relay hangs
		<-ctx.Done()
		return contract.DeliverNotificationResult{}, ctx.Err()
	}
	s.execute()

	st := s.result()
	s.Equal(contract.StatusDiscarded, st.Status)
	s.Positive(s.recorded)
	s.Len(s.attempts, 1)
	s.Require().NotEmpty(s.updates)
	last := s.updates[len(s.updates)-1]
	s.Equal(contract.StatusDiscarded, last.Status)
	s.Require().NotNil(last.OperatorAction, "audited as an operator action")
	s.Equal("Discarded", s.statusAttrs[len(s.statusAttrs)-1])
}

// While parked, the workflow's current details (the Web UI's workflow
// page) say why it waits and what to send; after the retry they are gone.
func (s *notificationSuite) TestParkedDetailsSayWhy() {
	s.recordAs(contract.StatusPending)
	s.deliver = func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
		if len(s.attempts) <= 3 {
			return contract.DeliverNotificationResult{}, transient
		}
		return delivered(), nil
	}
	var parked, after string
	s.env.RegisterDelayedCallback(func() {
		parked = s.currentDetails()
		s.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{})
	}, time.Hour)
	s.execute()
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

// From generation 5 a notification delivered without leaving the happy
// path upserts no OutpostStatus: the attribute keeps the Pending its site
// set at start, and the workflow's completion says Delivered (one billed
// action and one visibility write less). One that was ever Retrying ends
// Delivered as before, and a worker of generation 4 upserts Delivered
// either way, as its recorded histories do.
func TestDeliveredWithoutUpsertFromGeneration5(t *testing.T) {
	for _, tc := range []struct {
		name       string
		generation int
		failures   int
		want       []string
	}{
		{"generation 5, first attempt", 5, 0, nil},
		{"generation 5, after a retry", 5, 1, []string{"Retrying", "Delivered"}},
		{"generation 4, first attempt", 4, 0, []string{"Delivered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &notificationSuite{generation: tc.generation, started: true}
			s.SetT(t)
			s.setup(policy.AttemptTimeout)
			require.NoError(t, s.env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(
				temporalcontract.AttrStatus.ValueSet(string(contract.StatusPending)))))
			s.recordAs(contract.StatusPending)
			attempts := 0
			s.deliver = func(context.Context, contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
				if attempts++; attempts <= tc.failures {
					return contract.DeliverNotificationResult{}, transient
				}
				return delivered(), nil
			}
			s.execute()
			require.Equal(t, contract.StatusDelivered, s.result().Status)
			require.Equal(t, tc.want, s.statusAttrs)
		})
	}
}
