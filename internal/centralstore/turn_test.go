package centralstore

import (
	"context"
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
	store, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "central.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store
}
