package activities_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/workflows"
)

// The purge activity, run "a year later" by its clock on a real SQLite file,
// deletes exactly the terminal rows past retention.
func TestPurgeCentralStoreAYearLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := openCentral(t)
	const day = 24 * time.Hour

	notification := func(at time.Time, status workflows.Status) string {
		t.Helper()
		id := uuid.NewString()
		_, err := store.InsertNotification(ctx, centralstore.Notification{
			NotificationID: id, Type: centralstore.NotificationTypeEmail, ListName: "ops", Subject: "s", Body: "b",
			Status: workflows.StatusPending, SourceSiteID: "plant-1", SiteEnqueuedAt: at, CreatedAt: at,
		})
		require.NoError(t, err)
		switch status {
		case workflows.StatusDelivered:
			require.NoError(t, store.MarkNotificationDelivered(ctx, id, at, []string{"ops@example.com"}))
		case workflows.StatusPending:
		default:
			require.NoError(t, store.UpdateNotificationStatus(ctx, workflows.NotificationUpdate{NotificationID: id, Status: status, At: at}))
		}
		return id
	}
	old := centralT0
	delivered, discarded := notification(old, workflows.StatusDelivered), notification(old, workflows.StatusDiscarded)
	parked, pending := notification(old, workflows.StatusParked), notification(old, workflows.StatusPending)
	fresh := notification(old.Add(200*day), workflows.StatusDelivered)

	call := func(seq int64, status workflows.Status, at time.Time) workflows.TrackedOperation {
		r := workflows.TrackedOperation{OperationID: uuid.NewString(), Kind: workflows.KindExternalCall, Target: "erp.createOrder",
			Status: status, SourceSiteID: "plant-1", CreatedAt: at, UpdatedAt: at, Seq: seq}
		if status.Terminal() {
			r.TerminalAt = &at
		}
		return r
	}
	calls := []workflows.TrackedOperation{
		call(1, workflows.StatusDelivered, old), call(2, workflows.StatusFailed, old), call(3, workflows.StatusDiscarded, old),
		call(4, workflows.StatusParked, old), call(5, workflows.StatusRetrying, old), call(6, workflows.StatusDelivered, old.Add(300*day)),
	}
	_, err := store.UpsertSiteCalls(ctx, calls)
	require.NoError(t, err)
	_, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{
		{EventID: "a", OperationID: pending, Kind: workflows.KindNotification, Event: centralstore.AuditEnqueued, At: old},
		{EventID: "b", OperationID: pending, Kind: workflows.KindNotification, Event: centralstore.AuditAttempt, At: old.Add(time.Hour)},
		{EventID: "c", OperationID: pending, Kind: workflows.KindNotification, Event: centralstore.AuditAttempt, At: old.Add(200 * day)},
	})
	require.NoError(t, err)

	acts := &activities.PurgeActivities{
		Store:     store,
		Retention: config.Retention{Notifications: 365 * day, SiteCalls: 90 * day, AuditLog: 365 * day, PurgeBatch: 2},
		Now:       func() time.Time { return old.Add(366 * day) },
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	v, err := env.ExecuteActivity(acts.PurgeCentralStore)
	require.NoError(t, err)
	var res workflows.PurgeResult
	require.NoError(t, v.Get(&res))
	require.Equal(t, workflows.PurgeResult{Notifications: 2, SiteCalls: 3, AuditLog: 2}, res)

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
	require.Equal(t, "c", events[0].EventID)

	// No retention configured purges nothing.
	none := &activities.PurgeActivities{Store: store, Now: func() time.Time { return old.Add(100 * 365 * day) }}
	env.RegisterActivity(none)
	v, err = env.ExecuteActivity(none.PurgeCentralStore)
	require.NoError(t, err)
	require.NoError(t, v.Get(&res))
	require.Equal(t, workflows.PurgeResult{}, res)
}
