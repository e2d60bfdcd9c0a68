package notification_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/centraltest"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/notification"
)

// centralT0 starts the mock clock of the workflow tests here: in the
// future, never a fixed date. The SDK's test environment computes a local
// activity's deadline from the mock clock but waits for it on the wall
// clock, so a start in the past makes each local activity's deadline
// already expired, and whether its result wins is a race.
var centralT0 = time.Now().UTC().Truncate(time.Second).Add(24 * time.Hour)

// switchSender is an Email adapter that fails every send with a
// connection error, as the mailer reports one, until recover.
type switchSender struct {
	mu      sync.Mutex
	failing bool
	sent    []notification.Message
}

func (s *switchSender) Deliver(_ context.Context, d notification.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return &targets.Failure{Err: errors.New("dial tcp 127.0.0.1:2525: connect: connection refused")}
	}
	s.sent = append(s.sent, d)
	return nil
}

func (s *switchSender) recover() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = false
}

// notificationRun is NotificationWorkflow on Temporal's test environment with
// the real notification activities over a real central store.
type notificationRun struct {
	env    *testsuite.TestWorkflowEnvironment
	acts   *notification.Activities
	sender *switchSender
	sub    contract.NotificationSubmission
}

func newNotificationRun(t *testing.T, store *centralstore.Store, failing bool) *notificationRun {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetStartTime(centralT0)
	r := &notificationRun{env: env, sender: &switchSender{failing: failing}}
	require.NoError(t, store.PutList(context.Background(), centralstore.List{
		Name: "ops", Type: contract.NotificationTypeEmail, Targets: []string{"ops@example.com"}, TypeData: "{}", UpdatedBy: "test",
	}, "created"))
	r.acts = &notification.Activities{
		Store: store, Adapters: notification.Adapters{contract.NotificationTypeEmail: r.sender},
		Policy: contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: time.Minute},
		Now:    env.Now,
	}
	env.RegisterWorkflowWithOptions(notification.Workflow{AttemptTimeout: time.Minute}.Run, workflow.RegisterOptions{Name: contract.WorkflowNotification})
	env.RegisterActivity(r.acts)
	r.sub = contract.NotificationSubmission{
		NotificationID: uuid.NewString(), ListName: "ops", Subject: "Pump 3 tripped", Body: "Pressure low",
		SourceSiteID: "plant-1", SiteEnqueuedAt: centralT0.Add(-time.Second),
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.SignalSubmit, r.sub) }, 0)
	return r
}

func (r *notificationRun) execute(t *testing.T) contract.NotificationState {
	t.Helper()
	r.env.ExecuteWorkflow(contract.WorkflowNotification)
	require.True(t, r.env.IsWorkflowCompleted())
	require.NoError(t, r.env.GetWorkflowError())
	var st contract.NotificationState
	require.NoError(t, r.env.GetWorkflowResult(&st))
	return st
}

// A notification that retries, parks, is retried by an operator and is
// delivered leaves Enqueued, every Attempt, both Terminal events and the
// operator's action in the audit log.
func TestNotificationDeliveryIsAudited(t *testing.T) {
	t.Parallel()
	store, _ := centraltest.Open(t)
	r := newNotificationRun(t, store, true)
	r.env.RegisterDelayedCallback(func() {
		r.sender.recover()
		r.env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "relay fixed"})
	}, time.Hour)
	require.Equal(t, contract.StatusDelivered, r.execute(t).Status)

	// Times: enqueued -1s; attempts at 0, 1m, 2m (parks); at 1h the operator
	// retries and attempt 4 delivers (the test clock stands still during
	// it, so the last three share a time).
	trail := centraltest.AuditTrail(t, store, r.sub.NotificationID)
	require.Equal(t, []string{
		"Enqueued Pending ", "Attempt Retrying ", "Attempt Retrying ", "Attempt Parked ", "Terminal Parked ",
	}, trail[:5])
	require.ElementsMatch(t, []string{"OperatorRetry Pending ana", "Attempt Delivered ", "Terminal Delivered "}, trail[5:])

	events, err := store.ListAuditEvents(context.Background(), r.sub.NotificationID)
	require.NoError(t, err)
	byID := map[string]centralstore.AuditEvent{}
	for _, e := range events {
		byID[e.EventID] = e
		require.Equal(t, "plant-1", e.SiteID, e.EventID)
		require.Equal(t, contract.KindNotification, e.Kind, e.EventID)
	}
	prefix := contract.NotificationWorkflowID(r.sub.NotificationID)
	require.Contains(t, byID[prefix+"/attempt/1"].Detail, "retry count 1: smtp send: dial tcp")
	require.Equal(t, centralT0, byID[prefix+"/attempt/1"].At)
	require.Contains(t, byID[prefix+"/terminal/Parked/3"].Detail, "retries exhausted (2)")
	require.Equal(t, "relay fixed", byID[prefix+"/operator/1"].Reason)
	require.Equal(t, "delivered to ops@example.com", byID[prefix+"/terminal/Delivered"].Detail)
	require.Equal(t, centralT0.Add(-time.Second), byID[prefix+"/enqueued"].At)
	require.Len(t, r.sender.sent, 1)
}

// Audit events are stored in the transaction of the change they describe:
// while the audit log refuses a delivery's Terminal event, the row is not
// marked Delivered either (the activity leaves it to the workflow, which
// retries the write with the events until the store takes both). The
// email went out once and every event is stored once.
func TestAuditIsStoredWithItsChange(t *testing.T) {
	t.Parallel()
	store, path := centraltest.Open(t)
	require.NoError(t, execCentral(path, `CREATE TRIGGER refuse_terminal BEFORE INSERT ON audit_log
		WHEN NEW.event = 'Terminal' BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`))
	r := newNotificationRun(t, store, false)
	var markedWhileRefused bool
	var recoverErr error
	r.env.RegisterDelayedCallback(func() {
		row, err := store.GetNotification(context.Background(), r.sub.NotificationID)
		markedWhileRefused = err != nil || row.Status == contract.StatusDelivered
		recoverErr = execCentral(path, `DROP TRIGGER refuse_terminal`)
	}, 3*time.Minute)

	require.Equal(t, contract.StatusDelivered, r.execute(t).Status)
	require.NoError(t, recoverErr)
	require.False(t, markedWhileRefused, "no Delivered row without its events")
	require.Len(t, r.sender.sent, 1)
	require.Equal(t, []string{"Enqueued Pending ", "Attempt Delivered ", "Terminal Delivered "},
		centraltest.AuditTrail(t, store, r.sub.NotificationID))
}
