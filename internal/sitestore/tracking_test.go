package sitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/hlc"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/internal/testutil"
)

var trackingT0 = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

// trackingClock is the store's injected clock; tests move it by hand.
type trackingClock struct{ t time.Time }

func (c *trackingClock) now() time.Time          { return c.t }
func (c *trackingClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// openTracking opens a fresh site file under t.TempDir() on a clock frozen at trackingT0.
func openTracking(t *testing.T) (*Store, *trackingClock, string) {
	t.Helper()
	clock := &trackingClock{t: trackingT0}
	path := filepath.Join(t.TempDir(), "site.db")
	s, err := Open(context.Background(), path, Options{Now: clock.now})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, clock, path
}

func newOp(id string, grace time.Duration) NewOperation {
	return NewOperation{
		OperationID: id, Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Payload:      []byte(fmt.Sprintf(`{"kind":"ExternalCall","system":"erp","method":"createOrder","params":{"id":%q}}`, id)),
		Provenance:   Provenance{SiteID: "plant-1", Node: "node-a", Instance: "pump-3", Script: "onTrip"},
		AttemptGrace: grace,
	}
}

func begin(t *testing.T, s *Store, id string, grace time.Duration) contract.TrackedOperation {
	t.Helper()
	row, err := s.BeginOperation(context.Background(), newOp(id, grace))
	require.NoError(t, err)
	return row
}

func record(t *testing.T, s *Store, a Attempt) contract.TrackedOperation {
	t.Helper()
	row, err := s.RecordAttempt(context.Background(), a)
	require.NoError(t, err)
	return row
}

func dueIDs(t *testing.T, s *Store, at time.Time) []string {
	t.Helper()
	due, err := s.Due(context.Background(), at, 100)
	require.NoError(t, err)
	ids := []string{}
	for _, m := range due {
		ids = append(ids, m.ID)
	}
	return ids
}

func seqs(rows []contract.TrackedOperation) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.Seq)
	}
	return out
}

func ids(rows []contract.TrackedOperation) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.OperationID)
	}
	return out
}

// The tracking row and the buffer row are written together, and the buffer
// row waits out the immediate attempt's grace before it can be handed off.
func TestBeginOperationTracksPendingAndBuffersAfterGrace(t *testing.T) {
	t.Parallel()
	s, _, _ := openTracking(t)
	ctx := context.Background()
	grace := 90 * time.Second

	row := begin(t, s, "op-1", grace)
	require.Equal(t, contract.TrackedOperation{
		OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Status: contract.StatusPending, SourceSiteID: "plant-1", SourceNode: "node-a",
		SourceInstance: "pump-3", SourceScript: "onTrip", CreatedAt: trackingT0, UpdatedAt: trackingT0, Seq: 1,
	}, row)
	got, err := s.GetOperation(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, row, got)

	select {
	case <-s.TrackingChanged():
	default:
		t.Fatal("BeginOperation did not signal TrackingChanged")
	}

	require.Empty(t, dueIDs(t, s, trackingT0), "not due during the immediate attempt")
	require.Empty(t, dueIDs(t, s, trackingT0.Add(grace-time.Millisecond)))
	require.Equal(t, []string{"op-1"}, dueIDs(t, s, trackingT0.Add(grace)))

	m, err := s.Get(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, "op-1", m.TrackedOperationID)
	require.Equal(t, contract.KindExternalCall, m.Category)
	require.Equal(t, contract.StatusPending, m.Status)
	require.Equal(t, newOp("op-1", grace).Payload, m.Payload)

	payload, err := s.OperationPayload(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, newOp("op-1", grace).Payload, payload)
	got, payload, err = s.GetOperationAndPayload(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, row, got)
	require.Equal(t, newOp("op-1", grace).Payload, payload)

	_, err = s.BeginOperation(ctx, newOp("op-1", grace))
	require.Error(t, err, "an operation id is tracked once")
}

// A failed immediate attempt (Pending) hands the call to central at once,
// without waiting for the rest of the grace.
func TestRecordAttemptPendingMakesBufferRowDueAtOnce(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	ctx := context.Background()
	begin(t, s, "op-1", time.Hour)

	clock.advance(2 * time.Second)
	at := trackingT0.Add(time.Second)
	row := record(t, s, Attempt{OperationID: "op-1", Status: contract.StatusPending, LastError: "HTTP 503 Service Unavailable", At: &at})
	require.Equal(t, contract.StatusPending, row.Status)
	require.Equal(t, &at, row.LastAttemptAt)
	require.Equal(t, clock.t, row.UpdatedAt)
	require.Equal(t, int64(2), row.Seq)
	require.Nil(t, row.TerminalAt)

	require.Equal(t, []string{"op-1"}, dueIDs(t, s, clock.t))
	m, err := s.Get(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, "HTTP 503 Service Unavailable", m.LastError)
	require.Equal(t, &at, m.LastAttemptAt)
}

// Retrying and Parked are mirrored on the buffer row, which stays: the site
// delivers from it.
func TestRecordAttemptMirrorsNonTerminalStatusOnBuffer(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	ctx := context.Background()
	begin(t, s, "op-1", 0)

	at := clock.t
	next := at.Add(time.Minute)
	row := record(t, s, Attempt{OperationID: "op-1", Status: contract.StatusRetrying, RetryCount: 1, LastError: "HTTP 502", At: &at, NextAttemptAt: &next})
	require.Equal(t, &next, row.NextAttemptAt)
	m, err := s.Get(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, m.Status)
	require.Equal(t, 1, m.RetryCount)
	require.Equal(t, "HTTP 502", m.LastError)

	row = record(t, s, Attempt{OperationID: "op-1", Status: contract.StatusParked, RetryCount: 2, LastError: "retries exhausted (2): HTTP 502", At: &at})
	require.Nil(t, row.NextAttemptAt, "a parked call has no next attempt")
	require.Nil(t, row.TerminalAt, "parked is not terminal")
	m, err = s.Get(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, contract.StatusParked, m.Status)
	require.Equal(t, 2, m.RetryCount)
	_, err = s.OperationPayload(ctx, "op-1")
	require.NoError(t, err)
}

// Delivered, Failed and Discarded end the call: the buffer row goes, the row
// gets TerminalAt, and it never changes again.
func TestTerminalOutcomeDropsBufferRowAndFreezesRow(t *testing.T) {
	t.Parallel()
	for _, status := range []contract.Status{contract.StatusDelivered, contract.StatusFailed, contract.StatusDiscarded} {
		t.Run(string(status), func(t *testing.T) {
			t.Parallel()
			s, clock, _ := openTracking(t)
			ctx := context.Background()
			begin(t, s, "op-1", 0)
			begin(t, s, "op-2", 0)

			clock.advance(5 * time.Second)
			at := clock.t
			row := record(t, s, Attempt{OperationID: "op-1", Status: status, RetryCount: 3, LastError: "last words", At: &at})
			require.Equal(t, status, row.Status)
			require.NotNil(t, row.TerminalAt)
			require.Equal(t, clock.t, *row.TerminalAt)

			_, err := s.OperationPayload(ctx, "op-1")
			require.ErrorIs(t, err, ErrNotFound)
			got, payload, err := s.GetOperationAndPayload(ctx, "op-1")
			require.NoError(t, err, "the tracking row stays when the buffer row goes")
			require.Equal(t, row, got)
			require.Nil(t, payload)
			_, err = s.Get(ctx, "op-1")
			require.ErrorIs(t, err, ErrNotFound)
			_, err = s.OperationPayload(ctx, "op-2")
			require.NoError(t, err, "another operation's buffer row stays")

			clock.advance(time.Second)
			for _, next := range []contract.Status{contract.StatusRetrying, contract.StatusPending, contract.StatusDelivered} {
				_, err = s.RecordAttempt(ctx, Attempt{OperationID: "op-1", Status: next, At: &at})
				require.ErrorIs(t, err, ErrTerminalOperation, "%s after %s", next, status)
			}
			got, err = s.GetOperation(ctx, "op-1")
			require.NoError(t, err)
			require.Equal(t, row, got, "a terminal row never changes")
		})
	}
}

func TestRecordAttemptOnUnknownOperation(t *testing.T) {
	t.Parallel()
	s, _, _ := openTracking(t)
	_, err := s.RecordAttempt(context.Background(), Attempt{OperationID: "nope", Status: contract.StatusRetrying})
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s.GetOperation(context.Background(), "nope")
	require.ErrorIs(t, err, ErrNotFound)
	_, _, err = s.GetOperationAndPayload(context.Background(), "nope")
	require.ErrorIs(t, err, ErrNotFound)
}

// Seq is one counter for the whole site: every change, of any operation,
// takes the next number.
func TestEveryChangeTakesAHigherSiteWideSeq(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	at := clock.t
	var got []int64
	got = append(got, begin(t, s, "a", 0).Seq)
	got = append(got, begin(t, s, "b", 0).Seq)
	got = append(got, record(t, s, Attempt{OperationID: "a", Status: contract.StatusPending, At: &at}).Seq)
	got = append(got, record(t, s, Attempt{OperationID: "b", Status: contract.StatusRetrying, RetryCount: 1, At: &at}).Seq)
	got = append(got, record(t, s, Attempt{OperationID: "a", Status: contract.StatusRetrying, RetryCount: 1, At: &at}).Seq)
	got = append(got, record(t, s, Attempt{OperationID: "b", Status: contract.StatusDelivered, RetryCount: 2, At: &at}).Seq)
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, got)

	a, err := s.GetOperation(context.Background(), "a")
	require.NoError(t, err)
	require.Equal(t, int64(5), a.Seq, "the row carries its last change's seq")
}

// ChangesSince pages by seq; a row changed twice is one row at its latest seq.
func TestChangesSincePagesInSeqOrder(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	ctx := context.Background()
	begin(t, s, "a", 0) // 1
	begin(t, s, "b", 0) // 2
	begin(t, s, "c", 0) // 3
	at := clock.t
	record(t, s, Attempt{OperationID: "a", Status: contract.StatusRetrying, RetryCount: 1, At: &at}) // 4

	all, err := s.ChangesSince(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "c", "a"}, ids(all))
	require.Equal(t, []int64{2, 3, 4}, seqs(all))
	require.Equal(t, contract.StatusRetrying, all[2].Status, "the latest state of a")

	page, err := s.ChangesSince(ctx, 0, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, seqs(page))
	page, err = s.ChangesSince(ctx, page[len(page)-1].Seq, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, seqs(page))
	page, err = s.ChangesSince(ctx, 4, 2)
	require.NoError(t, err)
	require.Empty(t, page)
}

// Telemetry sends every change, each as the row stood after it: a call
// retried twice before telemetry caught up is three changes, so central
// audits each attempt. Changes central has are forgotten.
func TestTelemetryChangesKeepEveryStateUntilCentralHasIt(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	ctx := context.Background()
	begin(t, s, "a", 0) // 1
	begin(t, s, "b", 0) // 2
	at := clock.t
	record(t, s, Attempt{OperationID: "a", Status: contract.StatusRetrying, RetryCount: 1, At: &at}) // 3
	record(t, s, Attempt{OperationID: "a", Status: contract.StatusRetrying, RetryCount: 2, At: &at}) // 4

	changes, err := s.TelemetryChanges(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "a", "a"}, ids(changes))
	require.Equal(t, []int64{1, 2, 3, 4}, seqs(changes))
	require.Equal(t, []int{0, 0, 1, 2}, []int{changes[0].RetryCount, changes[1].RetryCount, changes[2].RetryCount, changes[3].RetryCount})
	require.Equal(t, contract.StatusPending, changes[0].Status, "a as it was begun, not as it is now")

	require.NoError(t, s.AdvanceTelemetryCursor(ctx, 3))
	changes, err = s.TelemetryChanges(ctx, 0, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{4}, seqs(changes), "the changes central has are forgotten")
	n, err := s.TelemetryBacklog(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func TestTelemetryCursorNeverMovesBackAndBacklogCountsAfterIt(t *testing.T) {
	t.Parallel()
	s, _, _ := openTracking(t)
	ctx := context.Background()
	for i := range 5 {
		begin(t, s, fmt.Sprintf("op-%d", i), 0)
	}
	backlog := func(limit int) int {
		t.Helper()
		n, err := s.TelemetryBacklog(ctx, limit)
		require.NoError(t, err)
		return n
	}
	cursor := func() int64 {
		t.Helper()
		c, err := s.TelemetryCursor(ctx)
		require.NoError(t, err)
		return c
	}

	require.Zero(t, cursor())
	require.Equal(t, 5, backlog(100))
	require.Equal(t, 3, backlog(3), "capped at the limit")

	require.NoError(t, s.AdvanceTelemetryCursor(ctx, 3))
	require.Equal(t, int64(3), cursor())
	require.Equal(t, 2, backlog(100))

	require.NoError(t, s.AdvanceTelemetryCursor(ctx, 1))
	require.Equal(t, int64(3), cursor(), "the cursor never moves back")
	require.Equal(t, 2, backlog(100))

	require.NoError(t, s.AdvanceTelemetryCursor(ctx, 5))
	require.Equal(t, int64(5), cursor())
	require.Zero(t, backlog(100))
}

// Only rows terminal before the cutoff go, at most limit per call; rows still
// in flight never do.
func TestPurgeTerminalDeletesOnlyOldTerminalRows(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	ctx := context.Background()
	for _, id := range []string{"delivered", "failed", "discarded", "pending", "retrying", "parked"} {
		begin(t, s, id, 0)
	}
	at := clock.t
	record(t, s, Attempt{OperationID: "retrying", Status: contract.StatusRetrying, RetryCount: 1, At: &at})
	record(t, s, Attempt{OperationID: "parked", Status: contract.StatusParked, RetryCount: 2, At: &at})
	clock.advance(time.Minute)
	record(t, s, Attempt{OperationID: "delivered", Status: contract.StatusDelivered, At: &at})
	clock.advance(time.Minute)
	record(t, s, Attempt{OperationID: "failed", Status: contract.StatusFailed, At: &at})
	clock.advance(time.Minute)
	last := record(t, s, Attempt{OperationID: "discarded", Status: contract.StatusDiscarded, At: &at})

	n, err := s.PurgeTerminal(ctx, trackingT0.AddDate(1, 0, 0), 100)
	require.NoError(t, err)
	require.Zero(t, n, "rows central has not received yet are kept, however old")
	require.NoError(t, s.AdvanceTelemetryCursor(ctx, last.Seq))

	listed := func() []string {
		t.Helper()
		rows, err := s.ListOperations(ctx)
		require.NoError(t, err)
		return ids(rows)
	}
	cutoff := trackingT0.Add(150 * time.Second) // after delivered and failed, before discarded

	n, err = s.PurgeTerminal(ctx, cutoff, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n, "respects the limit")
	require.Len(t, listed(), 5)

	n, err = s.PurgeTerminal(ctx, cutoff, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"discarded", "parked", "pending", "retrying"}, listed())

	n, err = s.PurgeTerminal(ctx, cutoff, 10)
	require.NoError(t, err)
	require.Zero(t, n)

	n, err = s.PurgeTerminal(ctx, trackingT0.AddDate(1, 0, 0), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"parked", "pending", "retrying"}, listed(), "in-flight rows are never purged")
}

// seq is a counter, not max(seq)+1: purging the newest row, even across a
// restart, never hands its number out again.
func TestPurgingNewestRowDoesNotReuseSeq(t *testing.T) {
	t.Parallel()
	s, clock, path := openTracking(t)
	ctx := context.Background()
	begin(t, s, "a", 0)
	at := clock.t
	require.Equal(t, int64(2), record(t, s, Attempt{OperationID: "a", Status: contract.StatusDelivered, At: &at}).Seq)
	require.NoError(t, s.AdvanceTelemetryCursor(ctx, 2))
	n, err := s.PurgeTerminal(ctx, clock.t.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	last, err := s.LastSeq(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), last, "LastSeq counts purged changes too")

	require.Equal(t, int64(3), begin(t, s, "b", 0).Seq)

	require.NoError(t, s.Close())
	s, err = Open(ctx, path, Options{Now: clock.now})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.Equal(t, int64(4), begin(t, s, "c", 0).Seq)
}

// A handed-off cached call stays buffered (the site delivers from it) but is
// no longer forwarded.
func TestMarkHandedOffRemovesFromDue(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	ctx := context.Background()
	begin(t, s, "a", 0)
	begin(t, s, "b", 0)
	require.Equal(t, []string{"a", "b"}, dueIDs(t, s, clock.t))

	require.NoError(t, s.MarkHandedOff(ctx, "a"))
	require.Equal(t, []string{"b"}, dueIDs(t, s, clock.t.Add(time.Hour)))
	_, err := s.OperationPayload(ctx, "a")
	require.NoError(t, err, "a handed-off call keeps its payload")
}

// A file written by the first release (schema version 1) opens, keeps its
// buffered rows and gains the tracking table.
func TestMigratesVersion1File(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "site.db")

	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, migrations[0])
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `PRAGMA user_version = 1`)
	require.NoError(t, err)
	payload := []byte(`{"subject":"Pump 3 tripped"}`)
	ts := hlc.Next(hlc.Timestamp{}, trackingT0.UnixMilli())
	link := hlc.Link([]byte{}, "m-old", ts, hlc.PayloadHash(payload))
	_, err = db.ExecContext(ctx, `INSERT INTO buffer (message_id, category, target, payload, status, created_at,
		next_attempt_at, site_id, node, hlc, payload_hash, prev_link, link) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		"m-old", contract.KindNotification, "ops", payload, string(contract.StatusPending), trackingT0.UnixNano(), trackingT0.UnixNano(),
		"plant-1", "node-a", ts.String(), hlc.PayloadHash(payload), []byte{}, link)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `INSERT INTO chain (node, last_hlc, head) VALUES (?, ?, ?)`, "node-a", ts.String(), link)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	clock := &trackingClock{t: trackingT0.Add(time.Minute)}
	s, err := Open(ctx, path, Options{Now: clock.now})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })

	var version int
	require.NoError(t, s.db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version))
	require.Equal(t, len(migrations), version)

	m, err := s.Get(ctx, "m-old")
	require.NoError(t, err)
	require.Equal(t, payload, m.Payload)
	require.Equal(t, link, m.Link)
	require.Equal(t, []string{"m-old"}, dueIDs(t, s, clock.t), "an old row is still forwarded")

	row := begin(t, s, "op-1", 0)
	require.Equal(t, int64(1), row.Seq)
	cursor, err := s.TelemetryCursor(ctx)
	require.NoError(t, err)
	require.Zero(t, cursor)
	m, err = s.Get(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, link, m.PrevLink, "the new row chains onto the old one")

	// Opening again runs nothing twice.
	require.NoError(t, s.Close())
	s, err = Open(ctx, path, Options{Now: clock.now})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	_, err = s.GetOperation(ctx, "op-1")
	require.NoError(t, err)
}

func TestLongLastErrorIsTruncated(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	ctx := context.Background()
	begin(t, s, "op-1", 0)
	long := strings.Repeat("é", maxErrorChars+500)
	at := clock.t
	row := record(t, s, Attempt{OperationID: "op-1", Status: contract.StatusRetrying, RetryCount: 1, LastError: long, At: &at})

	require.Equal(t, maxErrorChars+1, utf8.RuneCountInString(row.LastError))
	require.True(t, strings.HasPrefix(row.LastError, strings.Repeat("é", maxErrorChars)))
	require.True(t, strings.HasSuffix(row.LastError, "…"))
	require.True(t, utf8.ValidString(row.LastError), "cut on a rune boundary")

	got, err := s.GetOperation(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, row.LastError, got.LastError)
	m, err := s.Get(ctx, "op-1")
	require.NoError(t, err)
	require.Equal(t, row.LastError, m.LastError, "the buffer row carries the same cut message")

	short := strings.Repeat("é", maxErrorChars)
	row = record(t, s, Attempt{OperationID: "op-1", Status: contract.StatusRetrying, RetryCount: 2, LastError: short, At: &at})
	require.Equal(t, short, row.LastError, "a message at the bound is kept whole")
}

// An immediate attempt that finishes after a retry changed the row does not
// overwrite it.
func TestLateImmediateOutcomeIsSuperseded(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	begin(t, s, "slow", 0)
	at := clock.t
	retried := record(t, s, Attempt{OperationID: "slow", Status: contract.StatusRetrying, RetryCount: 1, LastError: "HTTP 503", At: &at})

	row, err := s.RecordAttempt(context.Background(), Attempt{OperationID: "slow", Status: contract.StatusPending, LastError: "timeout", At: &at, Immediate: true})
	require.ErrorIs(t, err, ErrSuperseded)
	require.Equal(t, retried, row, "the current row comes back")
	got, err := s.GetOperation(context.Background(), "slow")
	require.NoError(t, err)
	require.Equal(t, retried, got, "the row is unchanged")

	begin(t, s, "fresh", 0)
	row = record(t, s, Attempt{OperationID: "fresh", Status: contract.StatusPending, LastError: "timeout", At: &at, Immediate: true})
	require.Equal(t, contract.StatusPending, row.Status, "an untouched row takes the immediate outcome")
}

// Tracking times are kept to the microsecond, which every central store
// holds exactly: the row returned, the row read back and the mirror agree.
func TestTrackingTimesAreMicrosecondPrecise(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	clock.t = trackingT0.Add(123456789 * time.Nanosecond)
	begun := begin(t, s, "a", 0)
	at, next := clock.t.Add(time.Second+1), clock.t.Add(time.Minute+1)
	recorded := record(t, s, Attempt{OperationID: "a", Status: contract.StatusRetrying, RetryCount: 1, LastError: "503", At: &at, NextAttemptAt: &next})

	want := trackingT0.Add(123456 * time.Microsecond)
	require.Equal(t, want, begun.CreatedAt)
	require.Equal(t, want, recorded.UpdatedAt)
	require.Equal(t, want.Add(time.Second), *recorded.LastAttemptAt)
	require.Equal(t, want.Add(time.Minute), *recorded.NextAttemptAt)
	read, err := s.GetOperation(context.Background(), "a")
	require.NoError(t, err)
	require.Equal(t, recorded, read)
}

// The local retry loop polls DueOnSite every second, whatever the backlog:
// it must start from the tracking rows due and probe the buffer by
// operation, never read the buffered notifications.
func TestDueOnSiteSkipsHandedOffCallsAndReadsNoBacklog(t *testing.T) {
	t.Parallel()
	s, clock, _ := openTracking(t)
	ctx := context.Background()
	at, next := clock.t, clock.t.Add(time.Minute)
	for _, id := range []string{"a", "b"} {
		begin(t, s, id, 0)
		record(t, s, Attempt{OperationID: id, Status: contract.StatusRetrying, RetryCount: 1, LastError: "HTTP 502", At: &at, NextAttemptAt: &next})
	}
	_, err := s.Enqueue(ctx, NewMessage{Category: contract.KindNotification, Target: "ops", Payload: []byte(`{}`)})
	require.NoError(t, err)
	require.NoError(t, s.MarkHandedOff(ctx, "a"))
	due, err := s.DueOnSite(ctx, clock.t.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, ids(due), "a handed-off call is central's to retry")

	plan := testutil.QueryPlan(t, s.db, `SELECT `+trackingColumns+` FROM tracking `+dueOnSiteClause, 0, 10)
	require.Contains(t, plan, "SEARCH tracking USING INDEX tracking_due", plan)
	require.Contains(t, plan, "USING INDEX buffer_operation (tracked_operation_id=?)", plan)
	require.NotContains(t, plan, "buffer_due", "reads the buffer's unhanded rows: %s", plan)
}

// A cached call's buffer row is found through buffer_operation, a partial
// index, and SQLite uses it only when the statement repeats the index's
// condition. Each of these runs per Status request or per attempt outcome
// (in the writer): a scan costs time in proportion to the whole buffer,
// notifications included.
func TestCallBufferStatementsSeekTheOperationIndex(t *testing.T) {
	t.Parallel()
	s, _, _ := openTracking(t)
	for _, query := range []string{deleteCallBufferSQL, rescheduleCallSQL, recordCallAttemptSQL, callPayloadSQL, callHandedOffSQL} {
		args := make([]any, strings.Count(query, "?"))
		plan := testutil.QueryPlan(t, s.db, query, args...)
		require.Contains(t, plan, "SEARCH buffer USING INDEX buffer_operation (tracked_operation_id=?)", "%s\n%s", query, plan)
	}
	plan := testutil.QueryPlan(t, s.db, operationAndPayloadSQL, "op-1")
	require.Contains(t, plan, "SEARCH tracking USING PRIMARY KEY (operation_id=?)", plan)
	require.Contains(t, plan, "SEARCH buffer USING INDEX buffer_operation (tracked_operation_id=?)", plan)
}

// A file of schema version 12 keeps every tracking row, each column as it
// was, when migration 13 rebuilds the table keyed by operation id alone;
// its indexes come back, and Status then finds a row in one B-tree.
func TestTrackingRebuiltKeyedByOperationID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "site.db")
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	for _, m := range migrations[:12] {
		_, err := db.ExecContext(ctx, m)
		require.NoError(t, err)
	}
	_, err = db.ExecContext(ctx, `PRAGMA user_version = 12`)
	require.NoError(t, err)
	first, later := trackingT0.UnixNano(), trackingT0.Add(time.Hour).UnixNano()
	_, err = db.ExecContext(ctx, `INSERT INTO tracking (`+trackingColumns+`) VALUES
		('op-1', 'ExternalCall', 'erp.createOrder', 'Retrying', 2, 'HTTP 503', 'plant-1', 'node-a', 'pump-3', 'onTrip', ?, ?, ?, ?, NULL, 7, 'alice'),
		('op-2', 'DatabaseWrite', 'historian', 'Failed', 0, 'constraint', 'plant-1', 'node-b', '', '', ?, ?, NULL, NULL, ?, 9, '')`,
		first, first, first, later, first, later, later)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err := Open(ctx, path, Options{Now: (&trackingClock{t: trackingT0}).now})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })

	var table string
	require.NoError(t, s.db.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'tracking'`).Scan(&table))
	require.Contains(t, table, "WITHOUT ROWID")
	var indexes []string
	rows, err := s.db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tracking' AND sql IS NOT NULL ORDER BY name`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		indexes = append(indexes, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"tracking_due", "tracking_seq", "tracking_terminal"}, indexes)

	retrying, err := s.GetOperation(ctx, "op-1")
	require.NoError(t, err)
	at, next := time.Unix(0, first).UTC(), time.Unix(0, later).UTC()
	require.Equal(t, contract.TrackedOperation{OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Status: contract.StatusRetrying, RetryCount: 2, LastError: "HTTP 503", SourceSiteID: "plant-1", SourceNode: "node-a",
		SourceInstance: "pump-3", SourceScript: "onTrip", SubmittedBy: "alice", CreatedAt: at, UpdatedAt: at,
		LastAttemptAt: &at, NextAttemptAt: &next, Seq: 7}, retrying)
	failed, err := s.GetOperation(ctx, "op-2")
	require.NoError(t, err)
	require.Equal(t, contract.StatusFailed, failed.Status)
	require.Equal(t, &next, failed.TerminalAt)
	require.Equal(t, int64(9), failed.Seq)
	changed, err := s.ChangesSince(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, changed, 2, "tracking_seq orders the changes")

	_, err = s.db.ExecContext(ctx, `UPDATE tracking SET seq = 7 WHERE operation_id = 'op-2'`)
	require.ErrorContains(t, err, "UNIQUE", "tracking_seq is unique again")
	plan := testutil.QueryPlan(t, s.db, operationSQL, "op-1")
	require.Equal(t, "SEARCH tracking USING PRIMARY KEY (operation_id=?)\n", plan)
}
