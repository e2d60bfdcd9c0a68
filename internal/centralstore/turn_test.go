package centralstore

import (
	"context"
	"os"
	"path/filepath"
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
	require.Zero(t, store.upserts.len())
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

// upsertWhileTheTurnIsHeld empties store's WAL and holds its write turn
// while every batch is sent from its own goroutine; once all of them wait
// in the queue, it gives the turn back and returns their results in order.
func upsertWhileTheTurnIsHeld(t *testing.T, store *Store, batches []queuedBatch) []upsertResult {
	t.Helper()
	ctx := context.Background()
	emptyWAL(t, store)
	held, err := store.writing(ctx)
	require.NoError(t, err)
	results := make([]chan upsertResult, len(batches))
	for i, b := range batches {
		results[i] = make(chan upsertResult, 1)
		go func() {
			n, err := store.UpsertSiteCalls(ctx, b.rows, b.events...)
			results[i] <- upsertResult{n, err}
		}()
	}
	require.Eventually(t, func() bool { return store.upserts.len() == len(batches) }, 5*time.Second, time.Millisecond,
		"every batch waits in the queue while the turn is held")
	held()
	out := make([]upsertResult, len(batches))
	for i := range results {
		select {
		case out[i] = <-results[i]:
		case <-time.After(10 * time.Second):
			t.Fatalf("batch %d was not written within 10 s of the turn coming back", i)
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

// take hands out the oldest batches up to maxMergedRows rows, and always at
// least one, however big: a batch over the bound is written alone.
func TestUpsertQueueTakesTheOldestUpToTheBound(t *testing.T) {
	batch := func(rows int) *queuedUpsert {
		return &queuedUpsert{rows: make([]contract.TrackedOperation, rows), done: make(chan struct{})}
	}
	big, a, b, c := batch(maxMergedRows+1), batch(maxMergedRows/2), batch(maxMergedRows/2), batch(1)
	var q upsertQueue
	for _, u := range []*queuedUpsert{big, a, b, c} {
		q.add(u)
	}
	require.Equal(t, []*queuedUpsert{big}, q.take())
	require.Equal(t, []*queuedUpsert{a, b}, q.take())
	require.True(t, q.remove(c))
	require.False(t, q.remove(c), "a batch is removed once")
	require.Empty(t, q.take())
}
