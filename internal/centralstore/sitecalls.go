package centralstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// trackedColumns hold the fields of a workflows.TrackedOperation, in the
// order of siteCallArgs and scanSiteCall.
var trackedColumns = []string{
	"operation_id", "kind", "target", "status", "retry_count", "last_error",
	"source_site_id", "source_node", "source_instance", "source_script",
	"created_at", "updated_at", "last_attempt_at", "next_attempt_at", "terminal_at", "seq",
}

// siteCallColumns is every column of site_calls, in the order of the upsert
// statements; mirrored_at is central's own and is never read back.
var siteCallColumns = slices.Concat(trackedColumns, []string{"mirrored_at"})

// UpsertSiteCalls writes a batch of tracking rows in one transaction: new ids
// are inserted; an existing row is replaced only by a row with a higher Seq,
// so replays and out-of-order batches never move a row back to an older
// state. Returns how many rows were inserted or changed; a row skipped for
// its Seq does not count, on either dialect. events (what the rows show) are
// stored in the same transaction. On SQLite, batches that wait for the
// write turn at the same time share one transaction (writeQueue).
func (s *Store) UpsertSiteCalls(ctx context.Context, rows []contract.TrackedOperation, events ...AuditEvent) (int, error) {
	return s.UpsertSiteCallsAudited(ctx, rows, func([]contract.TrackedOperation, map[string]bool) []AuditEvent { return events })
}

// SiteCallEventsFunc makes the audit events of a write of tracking rows,
// told which operation ids the write inserted (created): the change that
// creates a call's row is the one that records the call's Enqueued event.
type SiteCallEventsFunc func(rows []contract.TrackedOperation, created map[string]bool) []AuditEvent

// UpsertSiteCallsAudited is UpsertSiteCalls with the audit events made by
// eventsOf once the rows are written, not before: telemetry's batches
// wait for the write turn together, and their events (two or three for
// every change, each a row of strings) held while they wait were a worker's
// largest memory (outpost bench --only fleet: 200 sites' batches at once).
func (s *Store) UpsertSiteCallsAudited(ctx context.Context, rows []contract.TrackedOperation, eventsOf SiteCallEventsFunc) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var n int
	err := s.writeQueued(ctx, len(rows), func(ctx context.Context, tx *sql.Tx) (_ []AuditEvent, err error) {
		var created map[string]bool
		n, created, err = s.upsertSiteCalls(ctx, tx, rows)
		if err != nil {
			return nil, err
		}
		return eventsOf(rows, created), nil
	})
	if err != nil {
		return 0, fmt.Errorf("upsert site calls: %w", err)
	}
	return n, nil
}

// MirrorReconciled upserts rows like UpsertSiteCallsAudited and, in the
// same transaction, advances siteID's reconciliation cursor to cursor (never
// moving it back): the cursor never claims rows that were not stored.
func (s *Store) MirrorReconciled(ctx context.Context, siteID string, rows []contract.TrackedOperation, cursor int64, eventsOf SiteCallEventsFunc) (int, error) {
	var n int
	err := s.inTxWithEvents(ctx, func(tx *sql.Tx) (_ []AuditEvent, err error) {
		var created map[string]bool
		if n, created, err = s.upsertSiteCalls(ctx, tx, rows); err != nil {
			return nil, err
		}
		_, err = tx.ExecContext(ctx, s.bind(s.dialect.advanceCursor), siteID, cursor, time.Now().UTC())
		if err != nil {
			return nil, fmt.Errorf("advance cursor to %d: %w", cursor, err)
		}
		return eventsOf(rows, created), nil
	})
	if err != nil {
		return 0, fmt.Errorf("mirror reconciliation of site %s: %w", siteID, err)
	}
	return n, nil
}

// ResetReconcileCursor moves siteID's cursor back to 0: the site's store was
// replaced and numbers its changes from 1 again.
func (s *Store) ResetReconcileCursor(ctx context.Context, siteID string) error {
	done, err := s.writing(ctx)
	if err != nil {
		return fmt.Errorf("reset cursor of site %s: %w", siteID, err)
	}
	defer done()
	_, err = s.db.ExecContext(ctx, s.bind(`UPDATE site_cursors SET reconciled_seq = 0, updated_at = ? WHERE site_id = ?`),
		time.Now().UTC(), siteID)
	if err != nil {
		return fmt.Errorf("reset cursor of site %s: %w", siteID, err)
	}
	return nil
}

// ReconcileCursor is siteID's cursor; 0 when the site was never reconciled.
func (s *Store) ReconcileCursor(ctx context.Context, siteID string) (int64, error) {
	var cursor int64
	err := s.reads.QueryRowContext(ctx, s.bind(`SELECT reconciled_seq FROM site_cursors WHERE site_id = ?`), siteID).Scan(&cursor)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read cursor of site %s: %w", siteID, err)
	}
	return cursor, nil
}

// GetSiteCall reads one mirrored row; ErrNotFound when absent.
func (s *Store) GetSiteCall(ctx context.Context, id string) (contract.TrackedOperation, error) {
	row := s.reads.QueryRowContext(ctx, s.bind(`SELECT `+strings.Join(trackedColumns, ", ")+`
		FROM site_calls WHERE operation_id = ?`), id)
	op, err := scanSiteCall(row)
	if errors.Is(err, sql.ErrNoRows) {
		return contract.TrackedOperation{}, fmt.Errorf("site call %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return contract.TrackedOperation{}, fmt.Errorf("read site call %s: %w", id, err)
	}
	return op, nil
}

// ListSiteCalls returns every mirrored row of siteID ordered by operation id.
func (s *Store) ListSiteCalls(ctx context.Context, siteID string) ([]contract.TrackedOperation, error) {
	rows, err := s.reads.QueryContext(ctx, s.bind(`SELECT `+strings.Join(trackedColumns, ", ")+`
		FROM site_calls WHERE source_site_id = ? ORDER BY operation_id`), siteID)
	if err != nil {
		return nil, fmt.Errorf("list site calls of %s: %w", siteID, err)
	}
	defer rows.Close()
	var out []contract.TrackedOperation
	for rows.Next() {
		op, err := scanSiteCall(rows)
		if err != nil {
			return nil, fmt.Errorf("list site calls of %s: %w", siteID, err)
		}
		out = append(out, op)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list site calls of %s: %w", siteID, err)
	}
	return out, nil
}

// upsertSiteCalls writes rows with one statement per chunk (a dialect may
// need two): telemetry batches are the hot path, and a statement per row
// would cost a round trip each. It returns how many rows it inserted or
// changed and the operation ids of those it inserted.
func (s *Store) upsertSiteCalls(ctx context.Context, tx *sql.Tx, rows []contract.TrackedOperation) (int, map[string]bool, error) {
	mirroredAt := time.Now().UTC()
	written, created := 0, map[string]bool{}
	for chunk := range slices.Chunk(latestBySeq(rows), s.dialect.siteCallChunk) {
		args := make([]any, 0, len(chunk)*len(siteCallColumns))
		for _, r := range chunk {
			args = siteCallArgs(args, r, mirroredAt)
		}
		for _, query := range s.dialect.upsertSiteCalls(len(chunk)) {
			n, err := s.upsertChunk(ctx, tx, s.bind(query), len(chunk), created, args...)
			if err != nil {
				return 0, nil, fmt.Errorf("write %d rows: %w", len(chunk), err)
			}
			written += n
		}
	}
	return written, created, nil
}

// upsertChunk runs query, one of a dialect's upsertSiteCalls statements
// for rows rows, in tx: it adds the ids the statement inserted to created
// and returns how many rows it inserted or changed.
func (s *Store) upsertChunk(ctx context.Context, tx *sql.Tx, query string, rows int, created map[string]bool, args ...any) (int, error) {
	result, err := s.queryChunk(ctx, tx, query, rows, s.dialect.siteCallChunk, args...)
	if err != nil {
		return 0, err
	}
	defer result.Close()
	n := 0
	for result.Next() {
		var id string
		var inserted bool
		if err := result.Scan(&id, &inserted); err != nil {
			return 0, fmt.Errorf("read the rows written: %w", err)
		}
		if inserted {
			created[id] = true
		}
		n++
	}
	return n, result.Err()
}

// latestBySeq keeps the highest-Seq row of each operation id, in first-seen
// order: SQL Server's MERGE fails when two source rows match one target row.
func latestBySeq(rows []contract.TrackedOperation) []contract.TrackedOperation {
	at := make(map[string]int, len(rows))
	out := make([]contract.TrackedOperation, 0, len(rows))
	for _, r := range rows {
		i, seen := at[r.OperationID]
		switch {
		case !seen:
			at[r.OperationID] = len(out)
			out = append(out, r)
		case r.Seq > out[i].Seq:
			out[i] = r
		}
	}
	return out
}

func siteCallArgs(args []any, r contract.TrackedOperation, mirroredAt time.Time) []any {
	return append(args, r.OperationID, r.Kind, r.Target, string(r.Status), r.RetryCount, r.LastError,
		r.SourceSiteID, r.SourceNode, r.SourceInstance, r.SourceScript,
		utc(r.CreatedAt), utc(r.UpdatedAt), utcPtr(r.LastAttemptAt), utcPtr(r.NextAttemptAt), utcPtr(r.TerminalAt), r.Seq,
		mirroredAt)
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanSiteCall(row scanner) (contract.TrackedOperation, error) {
	var op contract.TrackedOperation
	var status string
	var created, updated time.Time
	var lastAttempt, nextAttempt, terminal sql.NullTime
	err := row.Scan(&op.OperationID, &op.Kind, &op.Target, &status, &op.RetryCount, &op.LastError,
		&op.SourceSiteID, &op.SourceNode, &op.SourceInstance, &op.SourceScript,
		&created, &updated, &lastAttempt, &nextAttempt, &terminal, &op.Seq)
	if err != nil {
		return contract.TrackedOperation{}, err
	}
	op.Status = contract.Status(status)
	op.CreatedAt, op.UpdatedAt = created.UTC(), updated.UTC()
	op.LastAttemptAt, op.NextAttemptAt, op.TerminalAt = timePtr(lastAttempt), timePtr(nextAttempt), timePtr(terminal)
	return op, nil
}

// valueRows is n parenthesised rows of one "?" per site_calls column.
func valueRows(n int) string { return placeholderRows(n, len(siteCallColumns)) }

// placeholderRows is n parenthesised rows of cols "?" each.
func placeholderRows(n, cols int) string {
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	var b strings.Builder
	b.Grow(n * (len(row) + 2))
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// siteCallAssignments sets every column but the key (the first) from the row
// alias src.
func siteCallAssignments(src string) string {
	set := make([]string, 0, len(siteCallColumns)-1)
	for _, c := range siteCallColumns[1:] {
		set = append(set, c+" = "+src+"."+c)
	}
	return strings.Join(set, ", ")
}
