package centralstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// A full chunk's statement is prepared once and kept, and so is a chunk of
// one or two rows (a status change's audit events); a chunk of another
// size is not (there would be one per size). Rows and events go through
// both the same: every one is stored.
func TestOnlyFullAndSmallChunksKeepTheirStatements(t *testing.T) {
	ctx := context.Background()
	store := openSQLiteForTest(t)
	chunk := store.dialect.siteCallChunk
	batch := func(from, n int) ([]contract.TrackedOperation, []AuditEvent) {
		now := time.Now().UTC()
		rows := make([]contract.TrackedOperation, n)
		events := make([]AuditEvent, n)
		for i := range rows {
			id := fmt.Sprintf("call-%d", from+i)
			rows[i] = contract.TrackedOperation{OperationID: id, Kind: contract.KindExternalCall, Target: "erp.createOrder",
				Status: contract.StatusDelivered, SourceSiteID: "plant-1", CreatedAt: now, UpdatedAt: now, Seq: int64(from + i + 1)}
			events[i] = AuditEvent{EventID: "call/" + id + "/enqueued", OperationID: id, Kind: contract.KindExternalCall,
				SiteID: "plant-1", Event: AuditEnqueued, Status: contract.StatusPending, At: now}
		}
		return rows, events
	}

	for round := range 2 {
		rows, _ := batch(round*(chunk+3), chunk+3) // one full chunk and 3 rows
		n, err := store.UpsertSiteCalls(ctx, rows)
		require.NoError(t, err)
		require.Equal(t, chunk+3, n)
	}
	upsert := len(store.dialect.upsertSiteCalls(chunk)) // SQLite's statements a chunk
	require.Len(t, store.writeStmts.byQuery, upsert, "the full site_calls chunk's statements, once")

	rows, events := batch(10_000, store.dialect.auditChunk+3)
	_, err := store.UpsertSiteCalls(ctx, rows[:1], events...)
	require.NoError(t, err)
	require.Len(t, store.writeStmts.byQuery, 2*upsert+1, "and the one-row site_calls chunk's and the full audit chunk's")

	var calls, stored int
	require.NoError(t, store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM site_calls`).Scan(&calls))
	require.NoError(t, store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log`).Scan(&stored))
	require.Equal(t, 2*(chunk+3)+1, calls)
	require.Equal(t, store.dialect.auditChunk+3, stored)

	require.NoError(t, store.Close())
	require.Nil(t, store.writeStmts.byQuery, "closing the store closes them")
}

// A notification's insert, reads, delivery and audit events run on
// statements prepared for the first notification: the second prepares
// none, and every row and event is stored.
func TestNotificationsReuseTheirStatements(t *testing.T) {
	ctx := context.Background()
	store := openSQLiteForTest(t)
	require.NoError(t, store.PutList(ctx, List{Name: "ops", Type: contract.NotificationTypeEmail, Targets: []string{"ops@example.com"}, UpdatedBy: "test"}, "created"))
	deliver := func(id string) {
		now := time.Now().UTC()
		event := func(name string, status contract.Status) AuditEvent {
			return AuditEvent{EventID: "notification/" + id + "/" + name, OperationID: id, Kind: contract.KindNotification,
				SiteID: "plant-1", Event: AuditAttempt, Status: status, At: now}
		}
		row, _, err := store.InsertNotification(ctx, Notification{NotificationID: id, Type: contract.NotificationTypeEmail, ListName: "ops",
			Subject: "s", Body: "b", Status: contract.StatusPending, SourceSiteID: "plant-1", SiteEnqueuedAt: now, CreatedAt: now},
			event("enqueued", contract.StatusPending))
		require.NoError(t, err)
		require.Equal(t, id, row.NotificationID)
		_, err = store.GetList(ctx, "ops")
		require.NoError(t, err)
		require.NoError(t, store.MarkNotificationDelivered(ctx, id, now, []string{"ops@example.com"},
			event("attempt/1", contract.StatusDelivered), event("terminal/Delivered", contract.StatusDelivered)))
	}

	deliver("n-1")
	writes, reads := len(store.writeStmts.byQuery), len(store.readStmts.byQuery)
	require.Equal(t, 4, writes, "insert, delivered update, one-event and two-event audit inserts")
	require.Equal(t, 1, reads, "the list's read: the insert answers its row without reading it back")
	deliver("n-2")
	require.Len(t, store.writeStmts.byQuery, writes, "the second notification prepares no write")
	require.Len(t, store.readStmts.byQuery, reads, "nor a read")

	for _, id := range []string{"n-1", "n-2"} {
		n, err := store.GetNotification(ctx, id)
		require.NoError(t, err)
		require.Equal(t, contract.StatusDelivered, n.Status, id)
		events, err := store.ListAuditEvents(ctx, id)
		require.NoError(t, err)
		require.Len(t, events, 3, id)
	}
}
