package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/centraltest"
)

// The purge activity, run "a year later" by its clock on a real SQLite file,
// deletes exactly the terminal rows past retention.
func TestPurgeCentralStoreAYearLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := centraltest.Open(t)
	const day = 24 * time.Hour

	notification := func(at time.Time, status contract.Status) string {
		t.Helper()
		id := uuid.NewString()
		_, _, err := store.InsertNotification(ctx, centralstore.Notification{
			NotificationID: id, Type: contract.NotificationTypeEmail, ListName: "ops", Subject: "s", Body: "b",
			Status: contract.StatusPending, SourceSiteID: "plant-1", SiteEnqueuedAt: at, CreatedAt: at,
		})
		require.NoError(t, err)
		switch status {
		case contract.StatusDelivered:
			require.NoError(t, store.MarkNotificationDelivered(ctx, id, at, []string{"ops@example.com"}))
		case contract.StatusPending:
		default:
			require.NoError(t, store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{NotificationID: id, Status: status, At: at}))
		}
		return id
	}
	old := centralT0
	delivered, discarded := notification(old, contract.StatusDelivered), notification(old, contract.StatusDiscarded)
	parked, pending := notification(old, contract.StatusParked), notification(old, contract.StatusPending)
	fresh := notification(old.Add(200*day), contract.StatusDelivered)

	call := func(seq int64, status contract.Status, at time.Time) contract.TrackedOperation {
		r := contract.TrackedOperation{OperationID: uuid.NewString(), Kind: contract.KindExternalCall, Target: "erp.createOrder",
			Status: status, SourceSiteID: "plant-1", CreatedAt: at, UpdatedAt: at, Seq: seq}
		if status.Terminal() {
			r.TerminalAt = &at
		}
		return r
	}
	calls := []contract.TrackedOperation{
		call(1, contract.StatusDelivered, old), call(2, contract.StatusFailed, old), call(3, contract.StatusDiscarded, old),
		call(4, contract.StatusParked, old), call(5, contract.StatusRetrying, old), call(6, contract.StatusDelivered, old.Add(300*day)),
	}
	_, err := store.UpsertSiteCalls(ctx, calls)
	require.NoError(t, err)
	_, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{
		{EventID: contract.NotificationWorkflowID(pending) + "/a", OperationID: pending, Kind: contract.KindNotification, Event: centralstore.AuditEnqueued, At: old},
		{EventID: contract.NotificationWorkflowID(pending) + "/b", OperationID: pending, Kind: contract.KindNotification, Event: centralstore.AuditAttempt, At: old.Add(time.Hour)},
		{EventID: contract.NotificationWorkflowID(pending) + "/c", OperationID: pending, Kind: contract.KindNotification, Event: centralstore.AuditAttempt, At: old.Add(200 * day)},
	})
	require.NoError(t, err)

	acts := &activities.PurgeActivities{
		Store:     store,
		Retention: activities.Retention{Notifications: 365 * day, SiteCalls: 90 * day, AuditLog: 365 * day, PurgeBatch: 2},
		Now:       func() time.Time { return old.Add(366 * day) },
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	v, err := env.ExecuteActivity(acts.PurgeCentralStore)
	require.NoError(t, err)
	var res contract.PurgeResult
	require.NoError(t, v.Get(&res))
	require.Equal(t, contract.PurgeResult{Notifications: 2, SiteCalls: 3, AuditLog: 2}, res)

	for _, id := range []string{delivered, discarded} {
		_, err := store.GetNotification(ctx, id)
		require.ErrorIs(t, err, centralstore.ErrNotFound)
	}
	for _, id := range []string{parked, pending, fresh} {
		_, err := store.GetNotification(ctx, id)
		require.NoError(t, err)
	}
	for i, c := range calls {
		_, err := store.GetSiteCall(ctx, c.OperationID)
		if i < 3 {
			require.ErrorIs(t, err, centralstore.ErrNotFound, c.Status)
		} else {
			require.NoError(t, err, c.Status)
		}
	}
	events, err := store.ListAuditEvents(ctx, pending)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, contract.NotificationWorkflowID(pending)+"/c", events[0].EventID)

	// No retention configured purges nothing.
	none := &activities.PurgeActivities{Store: store, Now: func() time.Time { return old.Add(100 * 365 * day) }}
	env.RegisterActivity(none)
	v, err = env.ExecuteActivity(none.PurgeCentralStore)
	require.NoError(t, err)
	require.NoError(t, v.Get(&res))
	require.Equal(t, contract.PurgeResult{}, res)
}
