// Package storetest is the one test suite every central store driver must
// pass: SQLite always, SQL Server when OUTPOST_MSSQL_DSN is set.
package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/workflows"
)

// Exercise runs the suite against store.
func Exercise(t *testing.T, store *centralstore.Store) {
	t.Run("InsertIsIdempotent", func(t *testing.T) { insertIsIdempotent(t, store) })
	t.Run("StatusUpdatesAndDelivery", func(t *testing.T) { statusUpdatesAndDelivery(t, store) })
	t.Run("TerminalRowsNeverChange", func(t *testing.T) { terminalRowsNeverChange(t, store) })
	t.Run("UnknownID", func(t *testing.T) {
		_, err := store.GetNotification(context.Background(), uuid.NewString())
		require.ErrorIs(t, err, centralstore.ErrNotFound)
	})
}

func newRow() centralstore.Notification {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return centralstore.Notification{
		NotificationID: uuid.NewString(), Type: centralstore.NotificationTypeEmail, ListName: "ops",
		Subject: "Pump 3 tripped — ünïcode", Body: "Pressure low", Status: workflows.StatusPending,
		SourceSiteID: "plant-1", SourceInstanceID: "pump-3", SourceScript: "trip.go", SourceNode: "node-a",
		SiteEnqueuedAt: now.Add(-time.Second), CreatedAt: now,
	}
}

func insertIsIdempotent(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	row := newRow()
	got, err := store.InsertNotification(ctx, row)
	require.NoError(t, err)
	require.Equal(t, row.Subject, got.Subject)
	require.Equal(t, row.SourceNode, got.SourceNode)
	require.True(t, row.SiteEnqueuedAt.Equal(got.SiteEnqueuedAt))

	changed := row
	changed.Subject, changed.Status = "a resubmit must not overwrite", workflows.StatusRetrying
	again, err := store.InsertNotification(ctx, changed)
	require.NoError(t, err)
	require.Equal(t, row.Subject, again.Subject)
	require.Equal(t, workflows.StatusPending, again.Status)
}

func statusUpdatesAndDelivery(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	row := newRow()
	_, err := store.InsertNotification(ctx, row)
	require.NoError(t, err)
	at := time.Now().UTC().Truncate(time.Millisecond)
	next := at.Add(time.Minute)
	require.NoError(t, store.UpdateNotificationStatus(ctx, workflows.NotificationUpdate{
		NotificationID: row.NotificationID, Status: workflows.StatusRetrying, RetryCount: 1,
		LastError: "connection refused", LastAttemptAt: &at, NextAttemptAt: &next,
	}))
	got, err := store.GetNotification(ctx, row.NotificationID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusRetrying, got.Status)
	require.Equal(t, 1, got.RetryCount)
	require.Equal(t, "connection refused", got.LastError)
	require.True(t, next.Equal(*got.NextAttemptAt))

	require.NoError(t, store.MarkNotificationDelivered(ctx, row.NotificationID, at, []string{"a@example.com", "b@example.com"}))
	got, err = store.GetNotification(ctx, row.NotificationID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDelivered, got.Status)
	require.Equal(t, []string{"a@example.com", "b@example.com"}, got.ResolvedTargets)
	require.True(t, at.Equal(*got.DeliveredAt))
	require.Nil(t, got.NextAttemptAt)
	require.Empty(t, got.LastError)
}

func terminalRowsNeverChange(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	row := newRow()
	_, err := store.InsertNotification(ctx, row)
	require.NoError(t, err)
	require.NoError(t, store.UpdateNotificationStatus(ctx, workflows.NotificationUpdate{
		NotificationID: row.NotificationID, Status: workflows.StatusDiscarded,
	}))
	err = store.MarkNotificationDelivered(ctx, row.NotificationID, time.Now(), []string{"a@example.com"})
	require.ErrorIs(t, err, centralstore.ErrTerminal)
	err = store.UpdateNotificationStatus(ctx, workflows.NotificationUpdate{NotificationID: row.NotificationID, Status: workflows.StatusPending})
	require.ErrorIs(t, err, centralstore.ErrTerminal)
	got, err := store.GetNotification(ctx, row.NotificationID)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDiscarded, got.Status)
}
