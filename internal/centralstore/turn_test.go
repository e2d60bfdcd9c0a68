package centralstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// A write waits for this process's turn on the SQLite file, and one whose
// context ends while it waits writes nothing: an ingest whose local
// activity timed out in the queue must not still upsert its batch (its
// retry does). Once the turn is free, the same write goes through.
func TestSQLiteWriteGivenUpInTheQueueWritesNothing(t *testing.T) {
	ctx := context.Background()
	store := openSQLiteForTest(t)
	row := contract.TrackedOperation{OperationID: "call-1", Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Status: contract.StatusDelivered, SourceSiteID: "plant-1", CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(), Seq: 1}

	held, err := store.writing(ctx)
	require.NoError(t, err)
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = store.UpsertSiteCalls(waitCtx, []contract.TrackedOperation{row})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "write turn")
	_, err = store.GetSiteCall(ctx, "call-1")
	require.ErrorIs(t, err, ErrNotFound, "the write given up in the queue wrote nothing")

	held()
	n, err := store.UpsertSiteCalls(ctx, []contract.TrackedOperation{row})
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// openSQLiteForTest opens a fresh central store file, closed when the test ends.
func openSQLiteForTest(t *testing.T) *Store {
	t.Helper()
	store, _ := openSQLiteAtForTest(t)
	return store
}

// openSQLiteAtForTest is openSQLiteForTest, with the file's path.
func openSQLiteAtForTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "central.db")
	store, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store, path
}

// Batches that wait for the turn at the same time are written by whoever
// gets it in one transaction, each caller getting its own count. The
// transaction shows in the WAL: every commit appends the pages it changed,
// so the batches written one after another append the pages they share
// once each.
func TestSQLiteQueuedUpsertsShareOneCommit(t *testing.T) {
	ctx := context.Background()
	batches := []queuedBatch{
		{rows: []contract.TrackedOperation{queuedCall("a-1")}},
		{rows: []contract.TrackedOperation{queuedCall("b-1"), queuedCall("b-2")}},
		{rows: []contract.TrackedOperation{queuedCall("c-1"), queuedCall("c-2"), queuedCall("c-3")}},
	}

	together, togetherPath := openSQLiteAtForTest(t)
	for i, got := range upsertWhileTheTurnIsHeld(t, together, batches) {
		require.NoError(t, got.err)
		require.Equal(t, len(batches[i].rows), got.n, "each caller gets its own batch's count")
	}
	apart, apartPath := openSQLiteAtForTest(t)
	emptyWAL(t, apart)
	for _, b := range batches {
		_, err := apart.UpsertSiteCalls(ctx, b.rows)
		require.NoError(t, err)
	}

	for _, b := range batches {
		for _, r := range b.rows {
			_, err := together.GetSiteCall(ctx, r.OperationID)
			require.NoError(t, err, "%s was stored", r.OperationID)
		}
	}
	require.Less(t, walSize(t, togetherPath), walSize(t, apartPath),
		"the queued batches were committed together, not one after another")
}

// A batch the store refuses (here an audit event outside its operation's
// trail) fails alone: the batches queued with it are stored.
func TestSQLiteQueuedUpsertFailsAlone(t *testing.T) {
	ctx := context.Background()
	store, _ := openSQLiteAtForTest(t)
	refused := AuditEvent{EventID: "call/other-op/Enqueued", OperationID: "bad-1", Kind: contract.KindExternalCall,
		SiteID: "plant-1", Event: AuditEnqueued, Status: contract.StatusPending, At: time.Now().UTC()}
	batches := []queuedBatch{
		{rows: []contract.TrackedOperation{queuedCall("a-1")}},
		{rows: []contract.TrackedOperation{queuedCall("bad-1")}, events: []AuditEvent{refused}},
		{rows: []contract.TrackedOperation{queuedCall("c-1"), queuedCall("c-2")}},
	}
	got := upsertWhileTheTurnIsHeld(t, store, batches)

	require.ErrorContains(t, got[1].err, "trail would not show it")
	_, err := store.GetSiteCall(ctx, "bad-1")
	require.ErrorIs(t, err, ErrNotFound, "the refused batch wrote nothing")
	for _, i := range []int{0, 2} {
		require.NoError(t, got[i].err)
		require.Equal(t, len(batches[i].rows), got[i].n)
		for _, r := range batches[i].rows {
			_, err := store.GetSiteCall(ctx, r.OperationID)
			require.NoError(t, err, "%s, queued with the refused batch, was stored", r.OperationID)
		}
	}
	require.Zero(t, store.queue.len())
}

type queuedBatch struct {
	rows   []contract.TrackedOperation
	events []AuditEvent
}

type upsertResult struct {
	n   int
	err error
}

// queuedCall is a delivered cached call of plant-1.
func queuedCall(id string) contract.TrackedOperation {
	now := time.Now().UTC()
	return contract.TrackedOperation{OperationID: id, Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Status: contract.StatusDelivered, SourceSiteID: "plant-1", CreatedAt: now, UpdatedAt: now, Seq: 1}
}

// upsertWhileTheTurnIsHeld upserts every batch, each from its own
// goroutine, while the turn is held (whileTheTurnIsHeld), and returns
// their results in order.
func upsertWhileTheTurnIsHeld(t *testing.T, store *Store, batches []queuedBatch) []upsertResult {
	t.Helper()
	out := make([]upsertResult, len(batches))
	whileTheTurnIsHeld(t, store, len(batches), func(i int) error {
		out[i].n, out[i].err = store.UpsertSiteCalls(context.Background(), batches[i].rows, batches[i].events...)
		return nil
	})
	return out
}

// whileTheTurnIsHeld empties store's WAL and holds its write turn while
// write(0) to write(n-1) run, each in its own goroutine; once all of them
// wait in the queue, it gives the turn back and returns their errors in
// order. whileWaiting runs while every write waits.
func whileTheTurnIsHeld(t *testing.T, store *Store, n int, write func(i int) error, whileWaiting ...func()) []error {
	t.Helper()
	emptyWAL(t, store)
	held, err := store.writing(context.Background())
	require.NoError(t, err)
	results := make([]chan error, n)
	for i := range n {
		results[i] = make(chan error, 1)
		go func() { results[i] <- write(i) }()
	}
	require.Eventually(t, func() bool { return store.queue.len() == n }, 5*time.Second, time.Millisecond,
		"every write waits in the queue while the turn is held")
	for _, check := range whileWaiting {
		check()
	}
	held()
	out := make([]error, n)
	for i := range results {
		select {
		case out[i] = <-results[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d was not made within 10 s of the turn coming back", i)
		}
	}
	return out
}

// emptyWAL checkpoints store's WAL and truncates it to nothing.
func emptyWAL(t *testing.T, store *Store) {
	t.Helper()
	_, err := store.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(TRUNCATE)")
	require.NoError(t, err)
}

// walSize is the size of the WAL beside the store file at path.
func walSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	return info.Size()
}

// take hands out the oldest writes up to maxMergedRows rows, and always at
// least one, however big: a write over the bound is made alone.
// Upserts waiting for the write turn have not made their audit events yet:
// each write makes them when it is written (UpsertSiteCallsAudited), so
// the batches of many sites waiting at once hold only their rows.
func TestSQLiteQueuedUpsertsMakeTheirEventsWhenWritten(t *testing.T) {
	store := openSQLiteForTest(t)
	var made atomic.Int32
	eventsOf := func(rows []contract.TrackedOperation, _ map[string]bool) []AuditEvent {
		made.Add(1)
		return []AuditEvent{{EventID: "call/" + rows[0].OperationID + "/enqueued", OperationID: rows[0].OperationID,
			Kind: contract.KindExternalCall, SiteID: "plant-1", Event: AuditEnqueued, Status: contract.StatusPending, At: rows[0].CreatedAt}}
	}
	errs := whileTheTurnIsHeld(t, store, 3, func(i int) error {
		_, err := store.UpsertSiteCallsAudited(context.Background(), []contract.TrackedOperation{queuedCall(fmt.Sprintf("lazy-%d", i))}, eventsOf)
		return err
	}, func() {
		require.Zero(t, made.Load(), "no write made its events while it waited for the turn")
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, made.Load())
	for i := range 3 {
		events, err := store.ListAuditEvents(context.Background(), fmt.Sprintf("lazy-%d", i))
		require.NoError(t, err)
		require.Len(t, events, 1, "lazy-%d's event stored with its row", i)
	}
}

func TestWriteQueueTakesTheOldestUpToTheBound(t *testing.T) {
	batch := func(rows int) *queuedWrite {
		return &queuedWrite{rows: rows, done: make(chan struct{})}
	}
	big, a, b, c := batch(maxMergedRows+1), batch(maxMergedRows/2), batch(maxMergedRows/2), batch(1)
	var q writeQueue
	for _, u := range []*queuedWrite{big, a, b, c} {
		q.add(u)
	}
	require.Equal(t, []*queuedWrite{big}, q.take())
	require.Equal(t, []*queuedWrite{a, b}, q.take())
	require.True(t, q.remove(c))
	require.False(t, q.remove(c), "a write is removed once")
	require.Empty(t, q.take())
}

// A notification's row changes queue for the turn like telemetry: the
// inserts, and then the deliveries, waiting at the same time share one
// commit, each with its audit events. A change that finds its row already
// terminal fails alone, storing nothing, and the changes queued with it
// are stored.
func TestSQLiteQueuedNotificationChangesShareOneCommit(t *testing.T) {
	ctx := context.Background()
	ids := []string{"n-1", "n-2", "n-3", "n-4"}
	together, togetherPath := openSQLiteAtForTest(t)
	errs := whileTheTurnIsHeld(t, together, len(ids), func(i int) error {
		_, _, err := together.InsertNotification(ctx, queuedNotification(ids[i]), notificationEvent(ids[i], "enqueued", contract.StatusPending))
		return err
	})
	for i, err := range errs {
		require.NoError(t, err, ids[i])
	}
	apart, apartPath := openSQLiteAtForTest(t)
	emptyWAL(t, apart)
	for _, id := range ids {
		_, _, err := apart.InsertNotification(ctx, queuedNotification(id), notificationEvent(id, "enqueued", contract.StatusPending))
		require.NoError(t, err)
	}
	require.Less(t, walSize(t, togetherPath), walSize(t, apartPath),
		"the queued inserts were committed together, not one after another")

	now := time.Now().UTC()
	deliver := func(id string) error {
		return together.MarkNotificationDelivered(ctx, id, now, []string{"ops@example.com"},
			notificationEvent(id, "attempt/1", contract.StatusDelivered), notificationEvent(id, "terminal/Delivered", contract.StatusDelivered))
	}
	require.NoError(t, deliver("n-3"))
	errs = whileTheTurnIsHeld(t, together, len(ids), func(i int) error { return deliver(ids[i]) })
	require.ErrorIs(t, errs[2], ErrTerminal, "n-3 was delivered before")
	for _, i := range []int{0, 1, 3} {
		require.NoError(t, errs[i], ids[i])
	}
	for _, id := range ids {
		n, err := together.GetNotification(ctx, id)
		require.NoError(t, err)
		require.Equal(t, contract.StatusDelivered, n.Status, id)
		events, err := together.ListAuditEvents(ctx, id)
		require.NoError(t, err)
		require.Len(t, events, 3, "%s: enqueued, attempt and terminal, each stored once", id)
	}
	require.Zero(t, together.queue.len())
}

// queuedNotification is a Pending notification of plant-1 to list ops.
func queuedNotification(id string) Notification {
	now := time.Now().UTC()
	return Notification{NotificationID: id, Type: contract.NotificationTypeEmail, ListName: "ops", Subject: "s", Body: "b",
		Status: contract.StatusPending, SourceSiteID: "plant-1", SiteEnqueuedAt: now, CreatedAt: now}
}

// notificationEvent is notification id's audit event name, with status.
func notificationEvent(id, name string, status contract.Status) AuditEvent {
	return AuditEvent{EventID: "notification/" + id + "/" + name, OperationID: id, Kind: contract.KindNotification,
		SiteID: "plant-1", Event: AuditAttempt, Status: status, At: time.Now().UTC()}
}
