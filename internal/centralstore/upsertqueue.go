package centralstore

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/dbtx"
)

// maxMergedRows bounds the tracking rows of upserts merged into one
// transaction: with every change's audit events, a transaction of 8,000
// changes holds about 20,000 audit rows, well inside the writer's page
// cache.
const maxMergedRows = 8000

// upsertQueue holds the site_calls upserts waiting for this process's write
// turn on a SQLite file. Whoever gets the turn writes every upsert waiting
// then in one transaction. A fleet's operation ids arrive in no order of
// the key, so each batch's rows and audit events change pages all over
// site_calls' and audit_log's indexes, and a commit writes every page it
// changed: batches that share a commit share most of those pages. On
// interleaved ids, 100,000 audited changes took 17-19 s as 100
// transactions and 8-9 s as 13.
type upsertQueue struct {
	mu      sync.Mutex
	waiting []*queuedUpsert
}

// queuedUpsert is one caller's batch and, once done is closed, its result.
type queuedUpsert struct {
	rows   []contract.TrackedOperation
	events []AuditEvent
	done   chan struct{}
	n      int
	err    error
}

// add puts u at the end of the queue.
func (q *upsertQueue) add(u *queuedUpsert) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.waiting = append(q.waiting, u)
}

// remove takes u out of the queue and reports whether it was still there:
// false once a writer took it.
func (q *upsertQueue) remove(u *queuedUpsert) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.waiting, u)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return true
}

// len is how many upserts wait.
func (q *upsertQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// take removes the oldest upserts, up to maxMergedRows rows but at least
// one, and returns them.
func (q *upsertQueue) take() []*queuedUpsert {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, rows := 0, 0
	for n < len(q.waiting) && (n == 0 || rows+len(q.waiting[n].rows) <= maxMergedRows) {
		rows += len(q.waiting[n].rows)
		n++
	}
	taken := slices.Clone(q.waiting[:n])
	q.waiting = slices.Delete(q.waiting, 0, n)
	return taken
}

// upsertQueued upserts rows and events on a SQLite file, in one
// transaction with the other upserts waiting for the turn at the same
// time. A caller whose ctx ends while its batch waits gets its error and
// writes nothing. One whose batch a writer already took gets its error
// too, and the batch may still be stored: storing it again on retry
// changes nothing (a row needs a higher seq, an event a new id).
func (s *Store) upsertQueued(ctx context.Context, rows []contract.TrackedOperation, events []AuditEvent) (int, error) {
	u := &queuedUpsert{rows: rows, events: events, done: make(chan struct{})}
	s.upserts.add(u)
	select {
	case s.turn <- struct{}{}:
		s.writeQueuedUntil(ctx, u)
	case <-u.done:
	case <-ctx.Done():
		if s.upserts.remove(u) {
			return 0, fmt.Errorf("wait for the store's write turn: %w", ctx.Err())
		}
		return 0, fmt.Errorf("wait for the transaction that took the batch: %w", ctx.Err())
	}
	return u.n, u.err
}

// writeQueuedUntil writes the queue's upserts in this process's turn until
// u is written, the oldest first, so u waits for no batch that came after
// it; then it gives the turn back. The writes outlive ctx: they carry
// other callers' batches too.
func (s *Store) writeQueuedUntil(ctx context.Context, u *queuedUpsert) {
	defer func() { <-s.turn }()
	ctx = context.WithoutCancel(ctx)
	for !isClosed(u.done) {
		s.writeMerged(ctx, s.upserts.take())
	}
}

// writeMerged writes group in one transaction. If it fails, each upsert is
// written alone, so a batch the store refuses fails alone and the others
// are stored.
func (s *Store) writeMerged(ctx context.Context, group []*queuedUpsert) {
	counts := make([]int, len(group))
	err := dbtx.Run(ctx, s.db, func(tx *sql.Tx) error {
		var events []AuditEvent
		for i, u := range group {
			n, err := s.upsertSiteCalls(ctx, tx, u.rows)
			if err != nil {
				return err
			}
			counts[i] = n
			events = append(events, u.events...)
		}
		// All at once, so they go in key order together (insertAuditEvents).
		_, err := s.insertAuditEvents(ctx, tx, events)
		return err
	})
	if err != nil && len(group) > 1 {
		for _, u := range group {
			s.writeMerged(ctx, []*queuedUpsert{u})
		}
		return
	}
	for i, u := range group {
		u.n, u.err = counts[i], err
		close(u.done)
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
