package centralstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"

	"github.com/outpost-dev/outpost/internal/dbtx"
)

// maxMergedRows bounds the rows of the writes merged into one transaction:
// with every change's audit events, a transaction of 8,000 telemetry
// changes holds about 20,000 audit rows. A central worker's telemetry
// writes wait for its telemetry budget before they queue
// (activities.TelemetryBudget), so theirs merge to fewer.
const maxMergedRows = 8000

// writeQueue holds the writes waiting for this process's write turn on a
// SQLite file: telemetry's site_calls upserts and every notification's row
// changes. Whoever gets the turn writes every write waiting then in one
// transaction, so they share one commit: one sync of the WAL, and each page
// they change written once.
//   - A fleet's operation ids arrive in no order of the key, so each
//     telemetry batch changes pages all over site_calls' and audit_log's
//     indexes. On interleaved ids, 100,000 audited changes took 17-19 s as
//     100 transactions and 8-9 s as 13.
//   - A notification's row is written twice (recorded before its first
//     attempt, marked Delivered after it), and the rows in flight together
//     share the index pages of their status and creation time. With 8 in
//     flight (outpost bench --only e2e), this process's CPU per delivered
//     notification fell by about 0.3 ms, and the end-to-end ratio rose from
//     0.86-0.89x to 0.90-0.94x in three alternating pairs of runs.
type writeQueue struct {
	mu      sync.Mutex
	waiting []*queuedWrite
}

// queuedWrite is one caller's write and, once done is closed, its result.
type queuedWrite struct {
	// rows is how many rows write changes, for maxMergedRows.
	rows int
	// write makes the caller's changes in tx and returns the audit events
	// to store with them. It may run twice (see writeMerged): it sets its
	// caller's results afresh each time.
	write func(context.Context, *sql.Tx) ([]AuditEvent, error)
	done  chan struct{}
	err   error
}

// add puts w at the end of the queue.
func (q *writeQueue) add(w *queuedWrite) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = append(q.waiting, w)
}

// remove takes w out of the queue and reports whether it was still there:
// false once a writer took it.
func (q *writeQueue) remove(w *queuedWrite) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.waiting, w)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return true
}

// len is how many writes wait.
func (q *writeQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// take removes the oldest writes, up to maxMergedRows rows but at least
// one, and returns them.
func (q *writeQueue) take() []*queuedWrite {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, rows := 0, 0
	for n < len(q.waiting) && (n == 0 || rows+q.waiting[n].rows <= maxMergedRows) {
		rows += q.waiting[n].rows
		n++
	}
	taken := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	return taken
}

// writeQueued runs write, which changes rows rows, and stores the audit
// events it returns, all in one transaction. On a SQLite file that
// transaction carries the other writes waiting for the turn at the same
// time too (writeQueue). A caller whose ctx ends while its write waits gets
// its error and writes nothing. One whose write a writer already took gets
// its error too, and the write may still be stored: every queued write can
// be made again without harm (a site_calls row needs a higher seq, an audit
// event and a notification's insert a new id, and the same status change
// made twice leaves the row as made once).
func (s *Store) writeQueued(ctx context.Context, rows int, write func(context.Context, *sql.Tx) ([]AuditEvent, error)) error {
	if s.turn == nil {
		// SQL Server locks rows: its writers do not wait for a turn.
		return s.writeAlone(ctx, write)
	}
	w := &queuedWrite{rows: rows, write: write, done: make(chan struct{})}
	s.queue.add(w)
	select {
	case s.turn <- struct{}{}:
		s.writeQueuedUntil(ctx, w)
	case <-w.done:
	case <-ctx.Done():
		if s.queue.remove(w) {
			return fmt.Errorf("wait for the store's write turn: %w", ctx.Err())
		}
		return fmt.Errorf("wait for the transaction that took the write: %w", ctx.Err())
	}
	return w.err
}

// writeAlone runs write and stores the audit events it returns in a
// transaction of its own.
func (s *Store) writeAlone(ctx context.Context, write func(context.Context, *sql.Tx) ([]AuditEvent, error)) error {
	var stored []AuditEvent
	err := dbtx.Run(ctx, s.db, s.storingEvents(ctx, func(tx *sql.Tx) ([]AuditEvent, error) { return write(ctx, tx) }, &stored))
	if err == nil {
		s.auditStored(stored)
	}
	return err
}

// writeQueuedUntil writes the queue's writes in this process's turn until
// w is written, the oldest first, so w waits for no write that came after
// it; then it gives the turn back. The writes outlive ctx: they carry
// other callers' writes too.
func (s *Store) writeQueuedUntil(ctx context.Context, w *queuedWrite) {
	defer func() { <-s.turn }()
	ctx = context.WithoutCancel(ctx)
	for !isClosed(w.done) {
		s.writeMerged(ctx, s.queue.take())
	}
}

// writeMerged writes group in one transaction. If it fails, each write is
// made alone, so a write the store refuses (or one that finds nothing to
// change) fails alone and the others are stored.
func (s *Store) writeMerged(ctx context.Context, group []*queuedWrite) {
	var stored []AuditEvent
	err := dbtx.Run(ctx, s.db, func(tx *sql.Tx) error {
		var events []AuditEvent
		for _, w := range group {
			e, err := w.write(ctx, tx)
			if err != nil {
				return err
			}
			events = append(events, e...)
		}
		// All at once, so they go in key order together (insertAuditEvents).
		var err error
		stored, err = s.insertAuditEvents(ctx, tx, events)
		return err
	})
	if err != nil && len(group) > 1 {
		for _, w := range group {
			s.writeMerged(ctx, []*queuedWrite{w})
		}
		return
	}
	if err == nil {
		s.auditStored(stored)
	}
	for _, w := range group {
		w.err = err
		close(w.done)
	}
}

// isClosed reports whether done is closed.
func isClosed(done chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}
