package sitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/hlc"
)

func openTest(t *testing.T, path string, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{Now: now})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func msg(i int) NewMessage {
	return NewMessage{
		ID: fmt.Sprintf("m-%03d", i), Category: contract.KindNotification, Target: "ops",
		Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Provenance: Provenance{SiteID: "plant-1", Node: "node-a"},
	}
}

// Every row links to the one before it, across transactions and reopenings,
// and the HLC keeps rising even when the wall clock stands still.
func TestEnqueueChainsRowsAcrossTransactionsAndRestarts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "site.db")
	frozen := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	clock := func() time.Time { return frozen }
	ctx := context.Background()

	s := openTest(t, path, clock)
	_, err := s.Enqueue(ctx, msg(0), msg(1), msg(2))
	require.NoError(t, err)
	_, err = s.Enqueue(ctx, msg(3))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openTest(t, path, clock)
	_, err = s.Enqueue(ctx, msg(4))
	require.NoError(t, err)

	due, err := s.Due(ctx, frozen, 100)
	require.NoError(t, err)
	require.Len(t, due, 5)
	var prev []byte
	var last hlc.Timestamp
	for i, m := range due {
		require.Equal(t, fmt.Sprintf("m-%03d", i), m.ID, "due rows come in HLC order")
		require.Equal(t, len(prev), len(m.PrevLink))
		require.Equal(t, string(prev), string(m.PrevLink))
		require.Equal(t, hlc.Link(prev, m.ID, m.HLC, hlc.PayloadHash(m.Payload)), m.Link)
		require.True(t, last.Before(m.HLC))
		require.Equal(t, frozen.UnixMilli(), m.HLC.Physical)
		prev, last = m.Link, m.HLC
	}
	require.Equal(t, uint32(4), due[4].HLC.Logical)
}

// A failed hand-off is recorded and the row is not due again until its next attempt.
func TestFailedAttemptSchedulesNextAndDeleteRemoves(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), func() time.Time { return now })
	ctx := context.Background()
	_, err := s.Enqueue(ctx, msg(0), msg(1))
	require.NoError(t, err)

	require.NoError(t, s.RecordFailedAttempt(ctx, "m-000", now, now.Add(10*time.Second), "central unreachable"))
	due, err := s.Due(ctx, now, 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.Equal(t, "m-001", due[0].ID)

	m, err := s.Get(ctx, "m-000")
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, m.Status)
	require.Equal(t, 1, m.RetryCount)
	require.Equal(t, "central unreachable", m.LastError)
	require.Equal(t, now, *m.LastAttemptAt)

	due, err = s.Due(ctx, now.Add(10*time.Second), 10)
	require.NoError(t, err)
	require.Len(t, due, 2)

	require.NoError(t, s.Delete(ctx, "m-000", "m-001"))
	_, err = s.Get(ctx, "m-000")
	require.ErrorIs(t, err, ErrNotFound)
	depth, err := s.Depth(ctx)
	require.NoError(t, err)
	require.Zero(t, depth)
}

// A committed row is on disk: the writer's connection, which commits
// everything, and the pool's both run WAL with synchronous=FULL (2).
func TestStoreCommitsDurably(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	ctx := context.Background()
	var mode string
	var sync int
	require.NoError(t, s.writer.conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
	require.NoError(t, s.writer.conn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
	require.Equal(t, "wal", mode)
	require.Equal(t, 2, sync, "the writer's connection must run synchronous=FULL")
	require.NoError(t, s.db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
	require.Equal(t, 2, sync, "pooled connections must run synchronous=FULL")
}

// Rows written while the clock ran an hour ahead are due again as soon as
// it is set right (they waited the hour before), and the store reports the
// clock's lead; rows scheduled within the allowed wait are left alone.
func TestRowsScheduledAheadOfTheClockAreDueAgain(t *testing.T) {
	t.Parallel()
	right := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	clock := right.Add(time.Hour)
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), func() time.Time { return clock })
	ctx := context.Background()
	_, err := s.Enqueue(ctx, msg(1))
	require.NoError(t, err)
	require.NoError(t, s.RecordFailedAttempt(ctx, "m-001", clock, clock.Add(10*time.Second), "central unreachable"))

	clock = right // set right
	due, err := s.Due(ctx, right, 10)
	require.NoError(t, err)
	require.Empty(t, due, "scheduled by the wrong clock")
	lead, err := s.ClockLead(ctx, right)
	require.NoError(t, err)
	require.Equal(t, time.Hour, lead)

	n, err := s.RescheduleAhead(ctx, right, 5*time.Minute)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	due, err = s.Due(ctx, right, 10)
	require.NoError(t, err)
	require.Len(t, due, 1)

	_, err = s.Enqueue(ctx, msg(2))
	require.NoError(t, err)
	require.NoError(t, s.RecordFailedAttempt(ctx, "m-002", right, right.Add(time.Minute), "central unreachable"))
	n, err = s.RescheduleAhead(ctx, right, 5*time.Minute)
	require.NoError(t, err)
	require.Zero(t, n, "a row within the allowed wait keeps its schedule")
}

// A store file keeps its id across reopenings; another file has its own.
func TestStoreIDIsTheFilesOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "site.db")
	first := openTest(t, path, nil)
	id, err := first.StoreID(ctx)
	require.NoError(t, err)
	require.Len(t, id, 16)
	require.NoError(t, first.Close())

	again, err := openTest(t, path, nil).StoreID(ctx)
	require.NoError(t, err)
	require.Equal(t, id, again, "the same file, reopened")
	other, err := openTest(t, filepath.Join(dir, "other.db"), nil).StoreID(ctx)
	require.NoError(t, err)
	require.NotEqual(t, id, other)
}

// A row parked on the site is listed, and an operator's requeue makes it
// due again with its history kept; a row not parked on the site cannot be
// requeued, and a call parked by its retries is central's, not the site's.
func TestParkedOnSiteIsListedAndRequeued(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), func() time.Time { return t0 })
	_, err := s.Enqueue(ctx, msg(0), msg(1))
	require.NoError(t, err)
	require.NoError(t, s.ParkUnforwardable(ctx, "m-000", t0, "central refused it for good: Blob data size exceeds limit."))
	begin(t, s, "call-parked", 0)
	record(t, s, Attempt{OperationID: "call-parked", Status: contract.StatusParked, RetryCount: 3, LastError: "retries exhausted (3)", At: &t0})
	require.NoError(t, s.MarkHandedOff(ctx, "call-parked"))

	parked, err := s.ListParkedOnSite(ctx)
	require.NoError(t, err)
	require.Len(t, parked, 1, "the call parked by its retries is not parked on the site")
	require.Equal(t, "m-000", parked[0].ID)
	require.Equal(t, []string{"m-001"}, dueIDs(t, s, t0), "a parked row is not handed off")

	require.ErrorIs(t, s.RequeueParked(ctx, "m-001", t0, "requeued by ana"), ErrNotFound, "m-001 is not parked")
	require.ErrorIs(t, s.RequeueParked(ctx, "call-parked", t0, "requeued by ana"), ErrNotFound, "central's to retry")
	require.NoError(t, s.RequeueParked(ctx, "m-000", t0, "requeued by ana"))
	m, err := s.Get(ctx, "m-000")
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, m.Status)
	require.Equal(t, "requeued by ana; before: central refused it for good: Blob data size exceeds limit.", m.LastError)
	require.ElementsMatch(t, []string{"m-000", "m-001"}, dueIDs(t, s, t0))
	parked, err = s.ListParkedOnSite(ctx)
	require.NoError(t, err)
	require.Empty(t, parked)
}

// Rows an earlier version parked on the site (it also parked hand-offs
// central accepts once set up) are due again after the upgrade; a call
// parked by its retries stays as it is.
func TestUpgradeRequeuesRowsParkedOnTheSite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "site.db")
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	s := openTest(t, path, func() time.Time { return t0 })
	_, err := s.Enqueue(ctx, msg(0))
	require.NoError(t, err)
	require.NoError(t, s.ParkUnforwardable(ctx, "m-000", t0, "central refused it for good, so it stays on the site: no mapping defined for search attribute OutpostKind"))
	begin(t, s, "call-refused", 0)
	require.NoError(t, s.ParkUnforwardable(ctx, "call-refused", t0, "central refused it for good, so it stays on the site: no mapping defined for search attribute OutpostKind"))
	begin(t, s, "call-parked", 0)
	record(t, s, Attempt{OperationID: "call-parked", Status: contract.StatusParked, RetryCount: 3, LastError: "retries exhausted (3)", At: &t0})
	require.NoError(t, s.MarkHandedOff(ctx, "call-parked"))
	// As version 8 left them: no parked_on_site column; then the upgrade.
	_, err = s.db.ExecContext(ctx, `DROP INDEX buffer_parked_on_site; ALTER TABLE buffer DROP COLUMN parked_on_site;`+migrations[8])
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openTest(t, path, func() time.Time { return t0 })
	require.ElementsMatch(t, []string{"m-000", "call-refused"}, dueIDs(t, s, t0))
	m, err := s.Get(ctx, "m-000")
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, m.Status)
	c, err := s.Get(ctx, "call-refused")
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, c.Status, "a call's row takes its tracking status again")
	c, err = s.Get(ctx, "call-parked")
	require.NoError(t, err)
	require.Equal(t, contract.StatusParked, c.Status, "a call parked by its retries is left alone")
}

// A row keeps the trace context of the call that buffered it across a
// restart, so its hand-off, however much later, continues that trace; a
// node taking the row over from its pair keeps it too.
func TestRowKeepsItsTraceContext(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "site.db")
	ctx := context.Background()
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced, untraced := msg(0), msg(1)
	traced.TraceParent = parent

	s := openTest(t, path, time.Now)
	stored, err := s.Enqueue(ctx, traced, untraced)
	require.NoError(t, err)
	require.Equal(t, parent, stored[0].TraceParent)
	require.NoError(t, s.Close())

	s = openTest(t, path, time.Now)
	due, err := s.Due(ctx, time.Now(), 10)
	require.NoError(t, err)
	require.Len(t, due, 2)
	require.Equal(t, parent, due[0].TraceParent)
	require.Empty(t, due[1].TraceParent)

	h, err := s.HandoverSet(ctx)
	require.NoError(t, err)
	other := openTest(t, filepath.Join(t.TempDir(), "other.db"), time.Now)
	_, err = other.Adopt(ctx, h)
	require.NoError(t, err)
	adopted, err := other.Get(ctx, traced.ID)
	require.NoError(t, err)
	require.Equal(t, parent, adopted.TraceParent)
}

// A cached call's buffer row keeps its call's trace context too.
func TestOperationKeepsItsTraceContext(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), time.Now)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, err := s.BeginOperation(context.Background(), NewOperation{OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp",
		Payload: []byte(`{}`), Provenance: Provenance{SiteID: "plant-1", Node: "node-a"}, TraceParent: parent})
	require.NoError(t, err)
	m, err := s.Get(context.Background(), "op-1")
	require.NoError(t, err)
	require.Equal(t, parent, m.TraceParent)
}
