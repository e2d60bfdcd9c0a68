// Package storetest is the one test suite every central store driver must
// pass: SQLite and PostgreSQL always, SQL Server when OUTPOST_MSSQL_DSN is
// set.
package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
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
	t.Run("SiteCallsRoundTrip", func(t *testing.T) { siteCallsRoundTrip(t, store) })
	t.Run("SiteCallsKeepHighestSeq", func(t *testing.T) { siteCallsKeepHighestSeq(t, store) })
	t.Run("SiteCallsLargeBatch", func(t *testing.T) { siteCallsLargeBatch(t, store) })
	t.Run("ReconcileCursorOnlyAdvances", func(t *testing.T) { reconcileCursorOnlyAdvances(t, store) })
	t.Run("ListSiteCallsBySite", func(t *testing.T) { listSiteCallsBySite(t, store) })
	t.Run("TerminalTimeOfNotifications", func(t *testing.T) { terminalTimeOfNotifications(t, store) })
	t.Run("AuditInsertIfNotExists", func(t *testing.T) { auditInsertIfNotExists(t, store) })
	t.Run("AuditLargeBatch", func(t *testing.T) { auditLargeBatch(t, store) })
	t.Run("AuditListByOperation", func(t *testing.T) { auditListByOperation(t, store) })
	t.Run("AuditListByEventIDs", func(t *testing.T) { auditListByEventIDs(t, store) })
	t.Run("AuditCarriedEvents", func(t *testing.T) { auditCarriedEvents(t, store) })
	t.Run("AuditEnqueuedCarried", func(t *testing.T) { auditEnqueuedCarried(t, store) })
	t.Run("AuditPurgeByHeadTime", func(t *testing.T) { auditPurgeByHeadTime(t, store) })
	t.Run("PurgeDeletesOnlyTerminalRowsPastRetention", func(t *testing.T) { purgeDeletesOnlyDueRows(t, store) })
	t.Run("PurgeStopsAtMaxRows", func(t *testing.T) { purgeStopsAtMaxRows(t, store) })
	t.Run("KPIsAndOperatorItems", func(t *testing.T) { kpiSuite(t, store) })
	t.Run("ListNotifications", func(t *testing.T) { listNotifications(t, store) })
	t.Run("ListCalls", func(t *testing.T) { listCalls(t, store) })
	t.Run("ListsAndChannels", func(t *testing.T) { listsAndChannels(t, store) })
	t.Run("AirgapImports", func(t *testing.T) { airgapImports(t, store) })
}

func newRow() centralstore.Notification {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return centralstore.Notification{
		NotificationID: uuid.NewString(), Type: contract.NotificationTypeEmail, ListName: "ops",
		Subject: "Pump 3 tripped — ünïcode", Body: "Pressure low", Status: contract.StatusPending,
		SourceSiteID: "plant-1", SourceInstanceID: "pump-3", SourceScript: "trip.go", SourceNode: "node-a",
		SiteEnqueuedAt: now.Add(-time.Second), CreatedAt: now,
	}
}

func insertIsIdempotent(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	row := newRow()
	got, inserted, err := store.InsertNotification(ctx, row)
	require.NoError(t, err)
	require.True(t, inserted, "a new row is inserted")
	require.Equal(t, row.Subject, got.Subject)
	require.Equal(t, row.SourceNode, got.SourceNode)
	require.True(t, row.SiteEnqueuedAt.Equal(got.SiteEnqueuedAt))

	stored, err := store.GetNotification(ctx, row.NotificationID)
	require.NoError(t, err)
	require.Equal(t, stored, got, "the insert answers the row as stored")

	changed := row
	changed.Subject, changed.Status = "a resubmit must not overwrite", contract.StatusRetrying
	again, inserted, err := store.InsertNotification(ctx, changed)
	require.NoError(t, err)
	require.False(t, inserted, "a resubmit inserts nothing")
	require.Equal(t, row.Subject, again.Subject)
	require.Equal(t, contract.StatusPending, again.Status)
	require.Equal(t, stored, again, "a resubmit answers the row as stored")

	// Every field set, in nanoseconds and another zone than UTC: the row
	// answered is still the row as read back.
	full := newRow()
	zone := time.FixedZone("plant", 3*3600)
	at := time.Now().In(zone)
	full.SiteEnqueuedAt, full.CreatedAt, full.LastAttemptAt, full.NextAttemptAt = at, at.Add(time.Nanosecond), &at, &at
	full.RetryCount, full.LastError, full.ResolvedTargets, full.TypeData = 2, "timeout", []string{"a@example.com"}, `{"k":"v"}`
	got, _, err = store.InsertNotification(ctx, full)
	require.NoError(t, err)
	stored, err = store.GetNotification(ctx, full.NotificationID)
	require.NoError(t, err)
	require.Equal(t, stored, got, "the insert answers the row as stored, to the nanosecond the store keeps")
}

func statusUpdatesAndDelivery(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	row := newRow()
	_, _, err := store.InsertNotification(ctx, row)
	require.NoError(t, err)
	at := time.Now().UTC().Truncate(time.Millisecond)
	next := at.Add(time.Minute)
	require.NoError(t, store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{
		NotificationID: row.NotificationID, Status: contract.StatusRetrying, RetryCount: 1,
		LastError: "connection refused", LastAttemptAt: &at, NextAttemptAt: &next,
	}))
	got, err := store.GetNotification(ctx, row.NotificationID)
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, got.Status)
	require.Equal(t, 1, got.RetryCount)
	require.Equal(t, "connection refused", got.LastError)
	require.True(t, next.Equal(*got.NextAttemptAt))

	require.NoError(t, store.MarkNotificationDelivered(ctx, row.NotificationID, at, []string{"a@example.com", "b@example.com"}))
	got, err = store.GetNotification(ctx, row.NotificationID)
	require.NoError(t, err)
	require.Equal(t, contract.StatusDelivered, got.Status)
	require.Equal(t, []string{"a@example.com", "b@example.com"}, got.ResolvedTargets)
	require.True(t, at.Equal(*got.DeliveredAt))
	require.Nil(t, got.NextAttemptAt)
	require.Empty(t, got.LastError)
}

func terminalRowsNeverChange(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	row := newRow()
	_, _, err := store.InsertNotification(ctx, row)
	require.NoError(t, err)
	require.NoError(t, store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{
		NotificationID: row.NotificationID, Status: contract.StatusDiscarded,
	}))
	err = store.MarkNotificationDelivered(ctx, row.NotificationID, time.Now(), []string{"a@example.com"})
	require.ErrorIs(t, err, centralstore.ErrTerminal)
	err = store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{NotificationID: row.NotificationID, Status: contract.StatusPending})
	require.ErrorIs(t, err, centralstore.ErrTerminal)
	got, err := store.GetNotification(ctx, row.NotificationID)
	require.NoError(t, err)
	require.Equal(t, contract.StatusDiscarded, got.Status)
}

// newSiteID is unique per call, so the suite can run again and again against
// one shared SQL Server database.
func newSiteID() string { return "site-" + uuid.NewString() }

func newSiteCall(site string, seq int64) contract.TrackedOperation {
	now := time.Now().UTC().Truncate(time.Microsecond) // as the site keeps tracking times
	last, next := now.Add(-time.Minute), now.Add(time.Minute)
	return contract.TrackedOperation{
		OperationID: uuid.NewString(), Kind: contract.KindExternalCall, Target: "erp.postOrder",
		Status: contract.StatusRetrying, RetryCount: 2, LastError: "timeout — ünïcode",
		SourceSiteID: site, SourceNode: "node-a", SourceInstance: "pump-3", SourceScript: "order.go",
		CreatedAt: now.Add(-time.Hour), UpdatedAt: now, LastAttemptAt: &last, NextAttemptAt: &next, Seq: seq,
	}
}

// requireSameCall compares times with Equal, since a database may hand back
// an equal instant in another representation, and every other field exactly.
func requireSameCall(t *testing.T, want, got contract.TrackedOperation) {
	t.Helper()
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "created_at: want %s, got %s", want.CreatedAt, got.CreatedAt)
	require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "updated_at: want %s, got %s", want.UpdatedAt, got.UpdatedAt)
	for _, p := range []struct {
		name      string
		want, got *time.Time
	}{
		{"last_attempt_at", want.LastAttemptAt, got.LastAttemptAt},
		{"next_attempt_at", want.NextAttemptAt, got.NextAttemptAt},
		{"terminal_at", want.TerminalAt, got.TerminalAt},
	} {
		require.Equal(t, p.want == nil, p.got == nil, p.name)
		if p.want != nil {
			require.True(t, p.want.Equal(*p.got), "%s: want %s, got %s", p.name, *p.want, *p.got)
		}
	}
	want.CreatedAt, want.UpdatedAt, want.LastAttemptAt, want.NextAttemptAt, want.TerminalAt = time.Time{}, time.Time{}, nil, nil, nil
	got.CreatedAt, got.UpdatedAt, got.LastAttemptAt, got.NextAttemptAt, got.TerminalAt = time.Time{}, time.Time{}, nil, nil, nil
	require.Equal(t, want, got)
}

func siteCallsRoundTrip(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	site := newSiteID()
	retrying := newSiteCall(site, 1)
	delivered := newSiteCall(site, 2)
	delivered.Kind, delivered.Target, delivered.Status, delivered.LastError = contract.KindDatabaseWrite, "historian", contract.StatusDelivered, ""
	terminal := delivered.UpdatedAt.Add(time.Second)
	delivered.NextAttemptAt, delivered.TerminalAt = nil, &terminal
	pending := newSiteCall(site, 3)
	pending.Status, pending.RetryCount, pending.LastError = contract.StatusPending, 0, ""
	pending.SourceNode, pending.SourceInstance, pending.SourceScript = "", "", ""
	pending.LastAttemptAt, pending.NextAttemptAt = nil, nil

	n, err := store.UpsertSiteCalls(ctx, []contract.TrackedOperation{retrying, delivered, pending})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for _, want := range []contract.TrackedOperation{retrying, delivered, pending} {
		got, err := store.GetSiteCall(ctx, want.OperationID)
		require.NoError(t, err)
		requireSameCall(t, want, got)
	}
}

// upsertCreated upserts rows and returns how many were written and the ids
// the write told its audit it created.
func upsertCreated(t *testing.T, store *centralstore.Store, rows ...contract.TrackedOperation) (int, []string) {
	t.Helper()
	var created []string
	n, err := store.UpsertSiteCallsAudited(context.Background(), rows, func(_ []contract.TrackedOperation, ids map[string]bool) []centralstore.AuditEvent {
		for id := range ids {
			created = append(created, id)
		}
		return nil
	})
	require.NoError(t, err)
	return n, created
}

// noAuditEvents audits nothing of a write of tracking rows.
func noAuditEvents([]contract.TrackedOperation, map[string]bool) []centralstore.AuditEvent {
	return nil
}

// The highest seq wins, whatever order changes arrive in; a write tells
// its audit which rows it inserted, not the ones it changed or skipped.
func siteCallsKeepHighestSeq(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	row := newSiteCall(newSiteID(), 10)
	n, created := upsertCreated(t, store, row)
	require.Equal(t, 1, n)
	require.Equal(t, []string{row.OperationID}, created)

	// A replay (equal seq) and a late batch (lower seq) change nothing.
	for _, seq := range []int64{9, 10} {
		stale := row
		stale.Status, stale.Seq = contract.StatusDelivered, seq
		n, created = upsertCreated(t, store, stale)
		require.Zero(t, n, "seq %d", seq)
		require.Empty(t, created, "seq %d", seq)
		got, err := store.GetSiteCall(ctx, row.OperationID)
		require.NoError(t, err)
		require.Equal(t, contract.StatusRetrying, got.Status, "seq %d", seq)
		require.Equal(t, int64(10), got.Seq)
	}

	newer := row
	newer.Status, newer.RetryCount, newer.Seq = contract.StatusParked, 3, 11
	n, created = upsertCreated(t, store, newer)
	require.Equal(t, 1, n)
	require.Empty(t, created, "a row changed, not inserted")
	got, err := store.GetSiteCall(ctx, row.OperationID)
	require.NoError(t, err)
	requireSameCall(t, newer, got)

	// One batch holding an id twice keeps the higher seq, whichever comes first.
	high, low := row, row
	high.Status, high.Seq = contract.StatusDelivered, 13
	low.Status, low.Seq = contract.StatusFailed, 12
	fresh := newSiteCall(row.SourceSiteID, 14)
	freshOlder := fresh
	freshOlder.Status, freshOlder.Seq = contract.StatusPending, 2
	n, created = upsertCreated(t, store, high, freshOlder, low, fresh)
	require.Equal(t, 2, n)
	require.Equal(t, []string{fresh.OperationID}, created)
	got, err = store.GetSiteCall(ctx, row.OperationID)
	require.NoError(t, err)
	requireSameCall(t, high, got)
	got, err = store.GetSiteCall(ctx, fresh.OperationID)
	require.NoError(t, err)
	requireSameCall(t, fresh, got)
}

func siteCallsLargeBatch(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	site := newSiteID()
	rows := make([]contract.TrackedOperation, 1234)
	for i := range rows {
		rows[i] = newSiteCall(site, int64(i+1))
	}
	n, err := store.UpsertSiteCalls(ctx, rows)
	require.NoError(t, err)
	require.Equal(t, len(rows), n)
	got, err := store.ListSiteCalls(ctx, site)
	require.NoError(t, err)
	require.Len(t, got, len(rows))

	n, err = store.UpsertSiteCalls(ctx, rows)
	require.NoError(t, err)
	require.Zero(t, n, "a replayed batch changes nothing")
}

func reconcileCursorOnlyAdvances(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	site, other := newSiteID(), newSiteID()
	cursor, err := store.ReconcileCursor(ctx, site)
	require.NoError(t, err)
	require.Zero(t, cursor)

	first := newSiteCall(site, 5)
	n, err := store.MirrorReconciled(ctx, site, []contract.TrackedOperation{first}, 5, noAuditEvents)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireCursor(t, store, site, 5)

	n, err = store.MirrorReconciled(ctx, site, nil, 3, noAuditEvents)
	require.NoError(t, err)
	require.Zero(t, n)
	requireCursor(t, store, site, 5)

	second := newSiteCall(site, 7)
	n, err = store.MirrorReconciled(ctx, site, []contract.TrackedOperation{second}, 9, noAuditEvents)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireCursor(t, store, site, 9)
	got, err := store.GetSiteCall(ctx, second.OperationID)
	require.NoError(t, err)
	requireSameCall(t, second, got)

	requireCursor(t, store, other, 0)

	// A replaced site store numbers its changes from 1 again: the cursor
	// starts over, and advances from there.
	require.NoError(t, store.ResetReconcileCursor(ctx, site))
	requireCursor(t, store, site, 0)
	_, err = store.MirrorReconciled(ctx, site, nil, 2, noAuditEvents)
	require.NoError(t, err)
	requireCursor(t, store, site, 2)
	require.NoError(t, store.ResetReconcileCursor(ctx, other), "a site never reconciled")
	requireCursor(t, store, other, 0)
}

func requireCursor(t *testing.T, store *centralstore.Store, site string, want int64) {
	t.Helper()
	got, err := store.ReconcileCursor(context.Background(), site)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func listSiteCallsBySite(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	site, other := newSiteID(), newSiteID()
	rows := []contract.TrackedOperation{newSiteCall(site, 1), newSiteCall(other, 2), newSiteCall(site, 3), newSiteCall(site, 4)}
	_, err := store.UpsertSiteCalls(ctx, rows)
	require.NoError(t, err)

	got, err := store.ListSiteCalls(ctx, site)
	require.NoError(t, err)
	var ids, want []string
	for _, r := range got {
		ids = append(ids, r.OperationID)
	}
	for _, r := range rows {
		if r.SourceSiteID == site {
			want = append(want, r.OperationID)
		}
	}
	slices.Sort(want)
	require.Equal(t, want, ids)

	_, err = store.GetSiteCall(ctx, uuid.NewString())
	require.ErrorIs(t, err, centralstore.ErrNotFound)
}
