package sitestore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/hlc"
)

// requireChain checks that log's entries link from its checkpoint to its head.
func requireLogChain(t *testing.T, log JobLog) {
	t.Helper()
	prev := log.CheckpointLink
	for _, e := range log.Entries {
		require.Equal(t, string(prev), string(e.PrevLink), "entry %s links to the one before", e.JobID)
		require.Equal(t, hlc.Link(prev, e.JobID, e.HLC, hlc.PayloadHash(e.Payload)), e.Link, "entry %s", e.JobID)
		prev = e.Link
	}
	require.Equal(t, string(prev), string(log.Head), "the chain ends at the node's head")
}

func jobIDs(log JobLog) []string {
	var ids []string
	for _, e := range log.Entries {
		ids = append(ids, e.JobID)
	}
	return ids
}

// Hand-off deletes buffer rows, never job-log entries; pruning drops only
// the acknowledged front of the chain and keeps a checkpoint from which
// the rest still verifies.
func TestJobLogSurvivesHandOffAndPrunesFromACheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	_, err := s.Enqueue(ctx, msg(0), msg(1), msg(2), msg(3))
	require.NoError(t, err)

	require.NoError(t, s.Delete(ctx, "m-000", "m-002")) // handed off online
	log, err := s.ReadJobLog(ctx, "node-a", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"m-000", "m-001", "m-002", "m-003"}, jobIDs(log), "hand-off deletes no entry")
	require.Empty(t, log.CheckpointLink, "the log starts at the node's first entry")
	requireLogChain(t, log)

	pruned, err := s.PruneJobLog(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, pruned, "only the acknowledged front goes: m-002 waits behind m-001")
	log, err = s.ReadJobLog(ctx, "node-a", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"m-001", "m-002", "m-003"}, jobIDs(log))
	require.NotEmpty(t, log.CheckpointLink)
	requireLogChain(t, log)

	require.NoError(t, s.Delete(ctx, "m-001", "m-003"))
	pruned, err = s.PruneJobLog(ctx, time.Now())
	require.NoError(t, err)
	require.Equal(t, 3, pruned)
	log, err = s.ReadJobLog(ctx, "node-a", nil)
	require.NoError(t, err)
	require.Empty(t, log.Entries)
	require.Equal(t, string(log.Head), string(log.CheckpointLink), "everything pruned: the checkpoint is the head")

	_, err = s.Enqueue(ctx, msg(4))
	require.NoError(t, err)
	log, err = s.ReadJobLog(ctx, "node-a", nil)
	require.NoError(t, err)
	requireLogChain(t, log)
}

// A log read after an HLC starts its chain at the entry before.
func TestReadJobLogAfterMovesTheCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	stored, err := s.Enqueue(ctx, msg(0), msg(1), msg(2))
	require.NoError(t, err)
	log, err := s.ReadJobLog(ctx, "node-a", &stored[0].HLC)
	require.NoError(t, err)
	require.Equal(t, []string{"m-001", "m-002"}, jobIDs(log))
	require.Equal(t, string(stored[0].Link), string(log.CheckpointLink))
	require.Equal(t, stored[0].HLC.String(), log.CheckpointHLC)
	requireLogChain(t, log)
}

// The same idempotency key and request is one operation; the key with
// another request is refused, and nothing of it is written. Pruning forgets
// the key only once its operation has left the site.
func TestIdempotencyKeyReplaysOrRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	keyed := msg(0)
	keyed.RequestHash = []byte("request-1")
	_, err := s.Enqueue(ctx, keyed)
	require.NoError(t, err)

	stored, err := s.Enqueue(ctx, keyed)
	require.NoError(t, err)
	require.True(t, stored[0].Replayed)
	depth, err := s.Depth(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, depth, "a replay writes nothing")

	other := keyed
	other.RequestHash = []byte("request-2")
	_, err = s.Enqueue(ctx, other)
	require.ErrorIs(t, err, ErrIdempotencyConflict)
	log, err := s.ReadJobLog(ctx, "node-a", nil)
	require.NoError(t, err)
	require.Len(t, log.Entries, 1)

	cutoff := time.Now().Add(time.Hour)
	n, err := s.PruneIdempotencyKeys(ctx, cutoff)
	require.NoError(t, err)
	require.Zero(t, n, "the key stays while its operation is on the site")
	require.NoError(t, s.Delete(ctx, keyed.ID)) // handed off online
	_, err = s.PruneJobLog(ctx, cutoff)
	require.NoError(t, err)
	n, err = s.PruneIdempotencyKeys(ctx, cutoff)
	require.NoError(t, err)
	require.Equal(t, 1, n, "gone from the buffer and the job log, its key goes")
	_, err = s.Enqueue(ctx, other)
	require.NoError(t, err, "a request after the key was forgotten is a new operation")
}

// A keyed cached call begun twice is one tracking row: the second begin
// answers the row as it is.
func TestIdempotentBeginOperation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	op := NewOperation{OperationID: "c-1", Kind: contract.KindExternalCall, Target: "erp.create", Payload: []byte(`{}`),
		Provenance: Provenance{SiteID: "plant-1", Node: "node-a"}, RequestHash: []byte("h")}
	first, err := s.BeginOperation(ctx, op)
	require.NoError(t, err)
	again, err := s.BeginOperation(ctx, op)
	require.ErrorIs(t, err, ErrReplayed)
	require.Equal(t, first.Seq, again.Seq)
	op.RequestHash = []byte("other")
	_, err = s.BeginOperation(ctx, op)
	require.ErrorIs(t, err, ErrIdempotencyConflict)
}

// A receipt settles notifications (their buffer rows go) and records
// central's state; a cached call keeps its row for the site to drive.
func TestSettleByReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	_, err := s.Enqueue(ctx, msg(0))
	require.NoError(t, err)
	_, err = s.BeginOperation(ctx, NewOperation{OperationID: "c-1", Kind: contract.KindExternalCall, Target: "erp.create",
		Payload: []byte(`{}`), Provenance: Provenance{SiteID: "plant-1", Node: "node-a"}})
	require.NoError(t, err)
	now := time.Now()
	_, err = s.RecordExport(ctx, Transfer{BundleID: "b-1", Entries: 2, At: now}, []string{"m-000", "c-1"})
	require.NoError(t, err)
	st, err := s.JobExportState(ctx, "m-000")
	require.NoError(t, err)
	require.NotNil(t, st.ExportedAt)
	require.Empty(t, st.CentralStatus)

	n, err := s.SettleByReceipt(ctx, now, now, []Settled{
		{ID: "m-000", Kind: contract.KindNotification, Status: contract.StatusPending},
		{ID: "c-1", Kind: contract.KindExternalCall, Status: contract.StatusPending},
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = s.Get(ctx, "m-000")
	require.ErrorIs(t, err, ErrNotFound, "central owns the notification now")
	_, err = s.Get(ctx, "c-1")
	require.NoError(t, err, "the site still drives its call")
	st, err = s.JobExportState(ctx, "m-000")
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, st.CentralStatus)

	n, err = s.SettleByReceipt(ctx, now, now, []Settled{{ID: "m-000", Kind: contract.KindNotification, Status: contract.StatusPending}})
	require.NoError(t, err)
	require.Zero(t, n, "the same receipt twice settles nothing more")
}

// A remote clock within the offset moves the node's clock forward; one
// beyond it is refused and leaves the clock alone.
func TestReceiveClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), func() time.Time { return now })
	ahead := hlc.Timestamp{Physical: now.Add(300 * time.Millisecond).UnixMilli(), Logical: 5}
	require.NoError(t, s.ReceiveClock(ctx, "node-a", ahead, 500*time.Millisecond))
	stored, err := s.Enqueue(ctx, msg(0))
	require.NoError(t, err)
	require.True(t, ahead.Before(stored[0].HLC), "the next entry orders after the received time")

	far := hlc.Timestamp{Physical: now.Add(time.Hour).UnixMilli()}
	require.ErrorIs(t, s.ReceiveClock(ctx, "node-a", far, 500*time.Millisecond), hlc.ErrTooFarAhead)
	stored2, err := s.Enqueue(ctx, msg(1))
	require.NoError(t, err)
	require.True(t, stored2[0].HLC.Before(far), "a refused clock was not adopted")
}
