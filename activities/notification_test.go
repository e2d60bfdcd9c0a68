package activities_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
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
	store, path := openCentral(t)
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
	require.Equal(t, centralT0, when(t, row.DeliveredAt), "the send's time, not the write's")
	require.Equal(t, []string{"ops@example.com"}, row.ResolvedTargets)
	require.Equal(t, []string{"Enqueued Pending ", "Attempt Delivered ", "Terminal Delivered "},
		auditTrail(t, store, r.sub.NotificationID))
}

// The workflow retries a store write until the store answers, so a write
// refused by a terminal row must settle: done when the row already has its
// status (an earlier run of it committed), non-retryable otherwise.
func TestUpdateOfATerminalRow(t *testing.T) {
	t.Parallel()
	store, _ := openCentral(t)
	acts := &activities.NotificationActivities{Store: store}
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
	require.Equal(t, centralT0, when(t, row.DeliveredAt))
	require.Equal(t, []string{"ops@example.com"}, row.ResolvedTargets)

	err = update(contract.NotificationUpdate{NotificationID: delivered.NotificationID, Status: contract.StatusPending})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, contract.ErrTypeTerminalRow, appErr.Type())
	require.True(t, appErr.NonRetryable())
	var state contract.NotificationState
	require.NoError(t, appErr.Details(&state), "the refusal carries the row for the workflow to adopt")
	require.Equal(t, contract.StatusDelivered, state.Status)
	require.Equal(t, centralT0, when(t, state.DeliveredAt))
	require.Equal(t, []string{"ops@example.com"}, state.ResolvedTargets)
}
