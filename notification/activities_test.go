package notification_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/centraltest"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/notification"
)

// execCentral runs one statement on the central file through its own
// connection, as an operator or another process would.
func execCentral(path, query string) error {
	db, err := sqlitedb.Open(context.Background(), path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(query)
	return err
}

// failDeliveredMarks makes every write of status Delivered fail, as a store
// that went away right after the send would.
const failDeliveredMarks = `CREATE TRIGGER fail_delivered BEFORE UPDATE ON notifications
	WHEN NEW.status = 'Delivered' BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`

// The email went out but the row could not be marked Delivered for three
// minutes: exactly one email, and the row ends Delivered with its time and
// recipients, audited once.
func TestSentButUnmarkedIsDeliveredOnce(t *testing.T) {
	t.Parallel()
	store, path := centraltest.Open(t)
	require.NoError(t, execCentral(path, failDeliveredMarks))
	r := newNotificationRun(t, store, false)
	var recoverErr error
	r.env.RegisterDelayedCallback(func() { recoverErr = execCentral(path, `DROP TRIGGER fail_delivered`) }, 3*time.Minute)

	st := r.execute(t)
	require.NoError(t, recoverErr)
	require.Equal(t, contract.StatusDelivered, st.Status)
	require.Len(t, r.sender.sent, 1, "one email, however long the store took")
	row, err := store.GetNotification(context.Background(), r.sub.NotificationID)
	require.NoError(t, err)
	require.Equal(t, contract.StatusDelivered, row.Status)
	require.NotNil(t, row.DeliveredAt)
	require.Equal(t, centralT0, *row.DeliveredAt, "the send's time, not the write's")
	require.Equal(t, []string{"ops@example.com"}, row.ResolvedTargets)
	require.Equal(t, []string{"Enqueued Pending ", "Attempt Delivered ", "Terminal Delivered "},
		centraltest.AuditTrail(t, store, r.sub.NotificationID))
}

// The workflow retries a store write until the store answers, so a write
// refused by a terminal row must settle: done when the row already has its
// status (an earlier run of it committed), non-retryable otherwise.
func TestUpdateOfATerminalRow(t *testing.T) {
	t.Parallel()
	store, _ := centraltest.Open(t)
	acts := &notification.Activities{Store: store}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	update := func(u contract.NotificationUpdate) error {
		_, err := env.ExecuteActivity(acts.UpdateNotification, u)
		return err
	}
	record := func() string {
		id := uuid.NewString()
		_, err := env.ExecuteActivity(acts.RecordNotification, contract.NotificationSubmission{
			NotificationID: id, ListName: "ops", Subject: "s", SourceSiteID: "plant-1", SiteEnqueuedAt: centralT0,
		})
		require.NoError(t, err)
		return id
	}

	discarded := contract.NotificationUpdate{NotificationID: record(), Status: contract.StatusDiscarded, At: centralT0}
	require.NoError(t, update(discarded))
	require.NoError(t, update(discarded), "the same change again")

	delivered := contract.NotificationUpdate{NotificationID: record(), Status: contract.StatusDelivered,
		DeliveredAt: centralT0, ResolvedTargets: []string{"ops@example.com"}}
	require.NoError(t, update(delivered))
	require.NoError(t, update(delivered), "the same change again")
	row, err := store.GetNotification(context.Background(), delivered.NotificationID)
	require.NoError(t, err)
	require.NotNil(t, row.DeliveredAt)
	require.Equal(t, centralT0, *row.DeliveredAt)
	require.Equal(t, []string{"ops@example.com"}, row.ResolvedTargets)

	err = update(contract.NotificationUpdate{NotificationID: delivered.NotificationID, Status: contract.StatusPending})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, contract.ErrTypeTerminalRow, appErr.Type())
	require.True(t, appErr.NonRetryable())
	var state contract.NotificationState
	require.NoError(t, appErr.Details(&state), "the refusal carries the row for the workflow to adopt")
	require.Equal(t, contract.StatusDelivered, state.Status)
	require.NotNil(t, state.DeliveredAt)
	require.Equal(t, centralT0, *state.DeliveredAt)
	require.Equal(t, []string{"ops@example.com"}, state.ResolvedTargets)
}

// firstAttempt is RecordAndDeliverNotification on a real central store with
// list ops and sender as its Email adapter.
type firstAttempt struct {
	env    *testsuite.TestActivityEnvironment
	acts   *notification.Activities
	store  *centralstore.Store
	path   string
	sender *switchSender
}

func newFirstAttempt(t *testing.T, failing bool) *firstAttempt {
	t.Helper()
	store, path := centraltest.Open(t)
	require.NoError(t, store.PutList(context.Background(), centralstore.List{
		Name: "ops", Type: contract.NotificationTypeEmail, Targets: []string{"ops@example.com"}, TypeData: "{}", UpdatedBy: "test",
	}, "created"))
	f := &firstAttempt{store: store, path: path, sender: &switchSender{failing: failing}}
	f.acts = &notification.Activities{
		Store: store, Adapters: notification.Adapters{contract.NotificationTypeEmail: f.sender},
		Policy: contract.RetryPolicy{Interval: time.Minute, MaxRetries: 2, AttemptTimeout: time.Minute},
		Now:    func() time.Time { return centralT0 },
	}
	var ts testsuite.WorkflowTestSuite
	f.env = ts.NewTestActivityEnvironment()
	f.env.RegisterActivity(f.acts)
	return f
}

func (f *firstAttempt) run(list string) (string, contract.RecordAndDeliverResult, error) {
	id := uuid.NewString()
	sub := contract.NotificationSubmission{NotificationID: id, ListName: list, Subject: "s", Body: "b",
		SourceSiteID: "plant-1", SiteEnqueuedAt: centralT0.Add(-time.Second)}
	v, err := f.env.ExecuteActivity(f.acts.RecordAndDeliverNotification, contract.RecordAndDeliverInput{Submission: sub, Attempt: 1})
	var res contract.RecordAndDeliverResult
	if err == nil {
		err = v.Get(&res)
	}
	return id, res, err
}

// The first attempt records the row and delivers it: the row and its audit
// trail are those of a recorded row delivered by DeliverNotification.
func TestFirstAttemptRecordsAndDelivers(t *testing.T) {
	t.Parallel()
	f := newFirstAttempt(t, false)
	id, res, err := f.run("ops")
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, res.Recorded.State.Status, "the row as recorded")
	require.Equal(t, f.acts.Policy, res.Recorded.Policy)
	require.NotNil(t, res.Delivery)
	require.Equal(t, centralT0, res.Delivery.DeliveredAt)
	require.False(t, res.Delivery.Unrecorded)
	row, err := f.store.GetNotification(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, contract.StatusDelivered, row.Status)
	require.Equal(t, []string{"Enqueued Pending ", "Attempt Delivered ", "Terminal Delivered "}, centraltest.AuditTrail(t, f.store, id))
	require.Len(t, f.sender.sent, 1)
}

// A failed first attempt fails as DeliverNotification would (its message,
// type and retryability make the row's last error and next status), with
// the recorded row and policy in its details.
func TestFailedFirstAttemptCarriesTheRecordedRow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, list, message, errType string
		permanent                    bool
	}{
		{"transient", "ops", "smtp send: dial tcp 127.0.0.1:2525: connect: connection refused", "", false},
		{"permanent", "nope", `notification list "nope" does not exist at central`, contract.ErrTypeUnknownList, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFirstAttempt(t, true)
			id, _, err := f.run(tc.list)
			var appErr *temporal.ApplicationError
			require.True(t, errors.As(err, &appErr), "%v", err)
			require.Contains(t, appErr.Message(), tc.message)
			require.Equal(t, tc.errType, appErr.Type())
			require.Equal(t, tc.permanent, appErr.NonRetryable())
			var recorded contract.RecordNotificationResult
			require.NoError(t, appErr.Details(&recorded))
			require.Equal(t, id, recorded.State.NotificationID)
			require.Equal(t, contract.StatusPending, recorded.State.Status)
			require.Equal(t, f.acts.Policy, recorded.Policy)
			require.Equal(t, []string{"Enqueued Pending "}, centraltest.AuditTrail(t, f.store, id), "a failure is audited by the workflow's update")
		})
	}
}

// A first attempt run again finds the row its earlier run recorded, still
// Pending: that run's worker stopped before the workflow task ended (so the
// local activity runs once more), and whether it reached the receiver is
// unknown. The trail keeps an event for it; this run's outcome is the
// workflow's to record, as always.
func TestFirstAttemptRunAgainRecordsTheLostRun(t *testing.T) {
	t.Parallel()
	f := newFirstAttempt(t, true)
	sub := contract.NotificationSubmission{NotificationID: uuid.NewString(), ListName: "ops", Subject: "s",
		SourceSiteID: "plant-1", SiteEnqueuedAt: centralT0.Add(-time.Second)}
	in := contract.RecordAndDeliverInput{Submission: sub, Attempt: 1}
	_, err := f.env.ExecuteActivity(f.acts.RecordAndDeliverNotification, in)
	require.Error(t, err, "the lost run's attempt fails; its worker never reports it")
	require.Equal(t, []string{"Enqueued Pending "}, centraltest.AuditTrail(t, f.store, sub.NotificationID))

	_, err = f.env.ExecuteActivity(f.acts.RecordAndDeliverNotification, in)
	require.Error(t, err)
	require.Equal(t, []string{"Enqueued Pending ", "Attempt Pending "}, centraltest.AuditTrail(t, f.store, sub.NotificationID))
	events, err := f.store.ListAuditEvents(context.Background(), sub.NotificationID)
	require.NoError(t, err)
	require.Contains(t, events[1].Detail, "outcome unknown")
	require.Equal(t, centralT0, events[1].At, "the lost run began when it recorded the row")
}

// A row that is not Pending (a previous run's) is not attempted: the
// workflow decides from the row.
func TestFirstAttemptLeavesAnEarlierRunsRow(t *testing.T) {
	t.Parallel()
	f := newFirstAttempt(t, false)
	sub := contract.NotificationSubmission{NotificationID: uuid.NewString(), ListName: "ops", Subject: "s",
		SourceSiteID: "plant-1", SiteEnqueuedAt: centralT0}
	_, err := f.env.ExecuteActivity(f.acts.RecordNotification, sub)
	require.NoError(t, err)
	_, err = f.env.ExecuteActivity(f.acts.UpdateNotification, contract.NotificationUpdate{
		NotificationID: sub.NotificationID, Status: contract.StatusParked, LastError: "retries exhausted (2)"})
	require.NoError(t, err)

	v, err := f.env.ExecuteActivity(f.acts.RecordAndDeliverNotification, contract.RecordAndDeliverInput{Submission: sub, Attempt: 1})
	require.NoError(t, err)
	var res contract.RecordAndDeliverResult
	require.NoError(t, v.Get(&res))
	require.Nil(t, res.Delivery)
	require.Equal(t, contract.StatusParked, res.Recorded.State.Status)
	require.Empty(t, f.sender.sent)
}

// A store that refuses the row fails the attempt RowUnrecorded, with
// nothing sent: the workflow records the row itself.
func TestFirstAttemptThatCannotRecordSendsNothing(t *testing.T) {
	t.Parallel()
	f := newFirstAttempt(t, false)
	require.NoError(t, execCentral(f.path, `CREATE TRIGGER refuse_rows BEFORE INSERT ON notifications
		BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END`))
	_, _, err := f.run("ops")
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, contract.ErrTypeRowUnrecorded, appErr.Type())
	require.Contains(t, err.Error(), "disk I/O error")
	require.Empty(t, f.sender.sent)
}

// A webhook channel whose secret variable is unset, or holds a whsec_
// secret that is not valid, is the operator's to fix: the attempt parks
// ListMisconfigured (not as a receiver's refusal) and sends nothing.
func TestWebhookSecretProblemsAreMisconfigured(t *testing.T) {
	f := newFirstAttempt(t, false)
	ctx := context.Background()
	require.NoError(t, f.store.PutChannel(ctx, centralstore.Channel{Name: "hooks", Type: centralstore.ChannelWebhook,
		Settings: `{"secret_env":"OUTPOST_TEST_HOOK_SECRET"}`, UpdatedBy: "test"}, "created"))
	require.NoError(t, f.store.PutList(ctx, centralstore.List{Name: "hook", Type: contract.NotificationTypeWebhook,
		Targets: []string{"http://127.0.0.1:1/never"}, Channel: "hooks", TypeData: "{}", UpdatedBy: "test"}, "created"))
	f.acts.Adapters[contract.NotificationTypeWebhook] = notification.NewWebhook(nil, nil, nil)
	for secret, want := range map[string]string{
		"":                               "$OUTPOST_TEST_HOOK_SECRET (its secret_env) is not set",
		"whsec_+cobxsohXilkRBLU6wBP6g==": "the base64 of 16 bytes",
	} {
		t.Setenv("OUTPOST_TEST_HOOK_SECRET", secret)
		_, _, err := f.run("hook")
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%v", err)
		require.Equal(t, contract.ErrTypeMisconfigured, appErr.Type(), appErr.Message())
		require.True(t, appErr.NonRetryable())
		require.Contains(t, appErr.Message(), want)
	}
}

// The activity reads every adapter's failure through its one type: an SMTP
// server's 5xx is rejected and its 4xx retried as an smtp send; an HTTP
// receiver's 4xx is refused, and its 503 retried no sooner than its
// Retry-After. Each keeps the adapter's text.
func TestDeliveryFailuresBecomeTemporalErrors(t *testing.T) {
	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	_, teamsURL := serve(t, status(http.StatusBadRequest))
	_, busyURL := serve(t, status(http.StatusServiceUnavailable, "Retry-After", "120"))
	f := newFirstAttempt(t, false)
	f.acts.Adapters[contract.NotificationTypeEmail] = newMailer(t, sink)
	f.acts.Adapters[contract.NotificationTypeTeams] = notification.NewTeams(nil, nil)
	for name, url := range map[string]string{"teams": teamsURL, "busy": busyURL} {
		require.NoError(t, f.store.PutList(context.Background(), centralstore.List{Name: name, Type: contract.NotificationTypeTeams,
			Targets: []string{url}, TypeData: "{}", UpdatedBy: "test"}, "created"))
	}
	smtpText := func(id, reply string) string {
		return "sending SMTP RCPT TO command: " + reply + ", affected recipient(s): <ops@example.com>, affected message ID: <" + id + "@outpost>"
	}
	postText := func(url, answer string) string {
		return "POST " + strings.TrimSuffix(url, "?sig=secret") + ": " + answer + ": "
	}
	for _, tc := range []struct {
		name, list string
		smtpReply  int
		message    func(id string) string
		errType    string
		permanent  bool
		delay      time.Duration
	}{
		{"SMTP 550", "ops", 550, func(id string) string {
			return "smtp rejected the message: smtp 550: " + smtpText(id, `550 "5.0.0 mailbox unavailable"`)
		}, contract.ErrTypeRejected, true, 0},
		{"SMTP 451", "ops", 451, func(id string) string {
			return "smtp send: smtp 451: " + smtpText(id, `451 "4.0.0 mailbox unavailable"`)
		}, "", false, 0},
		{"HTTP 400", "teams", 0, func(string) string {
			return "refused: " + postText(teamsURL, "400 Bad Request")
		}, contract.ErrTypeRefused, true, 0},
		{"HTTP 503 with Retry-After", "busy", 0, func(string) string {
			return postText(busyURL, "503 Service Unavailable")
		}, contract.ErrTypeDeliveryFailed, false, 2 * time.Minute},
	} {
		sink.Reject(tc.smtpReply, "mailbox unavailable")
		id, _, err := f.run(tc.list)
		var appErr *temporal.ApplicationError
		require.ErrorAs(t, err, &appErr, tc.name)
		require.Equal(t, tc.message(id), appErr.Message(), tc.name)
		require.Equal(t, tc.errType, appErr.Type(), tc.name)
		require.Equal(t, tc.permanent, appErr.NonRetryable(), tc.name)
		require.Equal(t, tc.delay, appErr.NextRetryDelay(), tc.name)
	}
}
