package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// The purge tests date their rows in 2001, long before any other test's
// rows, so their cutoffs touch no one else's (the SQL Server database is
// shared between runs).
var purgeT0 = time.Date(2001, 3, 1, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

// purgeRequest is a purge run "a year later" with 365-day retention for
// notifications and the audit log and 90 days for site_calls.
func purgeRequest(batch int) centralstore.PurgeRequest {
	now := purgeT0.Add(366 * day)
	return centralstore.PurgeRequest{
		NotificationsBefore: now.Add(-365 * day), SiteCallsBefore: now.Add(-90 * day), AuditLogBefore: now.Add(-365 * day),
		Batch: batch,
	}
}

// notificationAt stores a notification in status, terminal at the given time.
func notificationAt(t *testing.T, store *centralstore.Store, status contract.Status, at time.Time) string {
	t.Helper()
	ctx := context.Background()
	row := newRow()
	row.SiteEnqueuedAt, row.CreatedAt = at.Add(-time.Minute), at.Add(-time.Minute)
	_, _, err := store.InsertNotification(ctx, row)
	require.NoError(t, err)
	switch status {
	case contract.StatusPending:
	case contract.StatusDelivered:
		require.NoError(t, store.MarkNotificationDelivered(ctx, row.NotificationID, at, []string{"ops@example.com"}))
	default:
		require.NoError(t, store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{
			NotificationID: row.NotificationID, Status: status, RetryCount: 3, LastError: "retries exhausted (3)",
			LastAttemptAt: &at, At: at,
		}))
	}
	return row.NotificationID
}

// siteCallAt is a site_calls row in status whose every time is at (a
// terminal time even on a non-terminal row: the status alone must keep it).
func siteCallAt(site string, seq int64, status contract.Status, at time.Time) contract.TrackedOperation {
	row := newSiteCall(site, seq)
	row.Status, row.CreatedAt, row.UpdatedAt, row.LastAttemptAt, row.NextAttemptAt = status, at, at, &at, nil
	row.TerminalAt = &at
	return row
}

func auditAt(at time.Time) centralstore.AuditEvent {
	return newAuditEvent(uuid.NewString(), 1, at)
}

func purgeDeletesOnlyDueRows(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	req := purgeRequest(2)
	// Rows an interrupted earlier run left behind go first, so the counts
	// below are this test's alone.
	_, err := store.Purge(ctx, req)
	require.NoError(t, err)

	old, recent, ancient := purgeT0, purgeT0.Add(300*day), purgeT0.Add(-20*365*day)
	var dueNotifications, keptNotifications []string
	for range 3 {
		dueNotifications = append(dueNotifications, notificationAt(t, store, contract.StatusDelivered, old))
	}
	dueNotifications = append(dueNotifications, notificationAt(t, store, contract.StatusDiscarded, old))
	dueNotifications = append(dueNotifications, notificationAt(t, store, contract.StatusDiscarded, old))
	keptNotifications = append(keptNotifications,
		notificationAt(t, store, contract.StatusDelivered, recent),
		notificationAt(t, store, contract.StatusDiscarded, recent),
		notificationAt(t, store, contract.StatusPending, ancient),
		notificationAt(t, store, contract.StatusRetrying, ancient),
		notificationAt(t, store, contract.StatusParked, ancient))

	site := newSiteID()
	// site_calls keep 90 days: 166 days before "now" is past it.
	dueCalls := []contract.TrackedOperation{
		siteCallAt(site, 1, contract.StatusDelivered, old),
		siteCallAt(site, 2, contract.StatusFailed, old),
		siteCallAt(site, 3, contract.StatusDiscarded, old),
		siteCallAt(site, 4, contract.StatusDelivered, purgeT0.Add(200*day)),
	}
	keptCalls := []contract.TrackedOperation{
		siteCallAt(site, 5, contract.StatusDelivered, purgeT0.Add(360*day)),
		siteCallAt(site, 6, contract.StatusPending, ancient),
		siteCallAt(site, 7, contract.StatusRetrying, ancient),
		siteCallAt(site, 8, contract.StatusParked, ancient),
	}
	_, err = store.UpsertSiteCalls(ctx, append(append([]contract.TrackedOperation{}, dueCalls...), keptCalls...))
	require.NoError(t, err)

	var dueEvents, keptEvents []centralstore.AuditEvent
	for i := range 5 {
		dueEvents = append(dueEvents, auditAt(old.Add(time.Duration(i)*time.Second)))
	}
	keptEvents = append(keptEvents, auditAt(recent), auditAt(purgeT0.Add(2*day)))
	_, err = store.InsertAuditEvents(ctx, append(append([]centralstore.AuditEvent{}, dueEvents...), keptEvents...))
	require.NoError(t, err)

	var progress []centralstore.PurgeResult
	req.Progress = func(p centralstore.PurgeResult) { progress = append(progress, p) }
	res, err := store.Purge(ctx, req)
	require.NoError(t, err)
	require.Equal(t, len(dueNotifications), res.Notifications)
	require.Equal(t, len(dueCalls), res.SiteCalls)
	require.Equal(t, len(dueEvents), res.AuditLog)
	require.False(t, res.More)

	// Bounded batches: no transaction deleted more than req.Batch rows; each
	// table ends on a short or empty batch: 2+2+1, 2+2+0, 2+2+1.
	require.Equal(t, res.Batches, len(progress))
	prev := 0
	for i, p := range progress {
		total := p.Notifications + p.SiteCalls + p.AuditLog
		require.LessOrEqual(t, total-prev, req.Batch, "batch %d", i)
		prev = total
	}
	require.Equal(t, 9, res.Batches)

	for _, id := range dueNotifications {
		_, err := store.GetNotification(ctx, id)
		require.ErrorIs(t, err, centralstore.ErrNotFound, "notification %s is past retention", id)
	}
	for _, id := range keptNotifications {
		_, err := store.GetNotification(ctx, id)
		require.NoError(t, err, "notification %s must stay", id)
	}
	for _, r := range dueCalls {
		_, err := store.GetSiteCall(ctx, r.OperationID)
		require.ErrorIs(t, err, centralstore.ErrNotFound, "site call %s (%s) is past retention", r.OperationID, r.Status)
	}
	for _, r := range keptCalls {
		_, err := store.GetSiteCall(ctx, r.OperationID)
		require.NoError(t, err, "site call %s (%s) must stay", r.OperationID, r.Status)
	}
	for _, e := range dueEvents {
		got, err := store.ListAuditEvents(ctx, e.OperationID)
		require.NoError(t, err)
		require.Empty(t, got, "audit event %s is past retention", e.EventID)
	}
	for _, e := range keptEvents {
		got, err := store.ListAuditEvents(ctx, e.OperationID)
		require.NoError(t, err)
		require.Len(t, got, 1, "audit event %s must stay", e.EventID)
	}

	// Nothing is left to purge.
	res, err = store.Purge(ctx, purgeRequest(2))
	require.NoError(t, err)
	require.Equal(t, centralstore.PurgeResult{Batches: 3}, res)
}

// A purge stops at MaxRows, says there is more, and the next one goes on.
func purgeStopsAtMaxRows(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	req := purgeRequest(2)
	_, err := store.Purge(ctx, req)
	require.NoError(t, err)
	var events []centralstore.AuditEvent
	for i := range 5 {
		events = append(events, auditAt(purgeT0.Add(time.Duration(i)*time.Second)))
	}
	_, err = store.InsertAuditEvents(ctx, events)
	require.NoError(t, err)

	req.MaxRows = 3
	res, err := store.Purge(ctx, req)
	require.NoError(t, err)
	require.Equal(t, 3, res.AuditLog)
	require.True(t, res.More)
	res, err = store.Purge(ctx, req)
	require.NoError(t, err)
	require.Equal(t, 2, res.AuditLog)
	require.False(t, res.More)
	left := 0
	for _, e := range events {
		got, err := store.ListAuditEvents(ctx, e.OperationID)
		require.NoError(t, err)
		left += len(got)
	}
	require.Zero(t, left, fmt.Sprintf("%d of %d events left", left, len(events)))
}

// terminal_at is the delivery time for Delivered and the workflow's decision
// time for Discarded, and stays unset for other statuses.
func terminalTimeOfNotifications(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Millisecond)
	for _, status := range []contract.Status{contract.StatusDelivered, contract.StatusDiscarded, contract.StatusParked} {
		id := notificationAt(t, store, status, at)
		got, err := store.GetNotification(ctx, id)
		require.NoError(t, err)
		if status == contract.StatusParked {
			require.Nil(t, got.TerminalAt, status)
			continue
		}
		require.NotNil(t, got.TerminalAt, status)
		require.True(t, at.Equal(*got.TerminalAt), "%s: want %s, got %s", status, at, *got.TerminalAt)
	}
}
