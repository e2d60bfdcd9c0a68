package sitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// maxErrorChars bounds a stored last error: the row travels in telemetry
// batches, and the start of a message is what an operator needs.
const maxErrorChars = 2000

// NewOperation is a cached call about to make its immediate attempt.
type NewOperation struct {
	OperationID string
	Kind        string // workflows.KindExternalCall or KindDatabaseWrite
	Target      string
	Payload     []byte
	Provenance  Provenance
	// SubmittedBy is who submitted the call (the site API token's holder),
	// kept in its tracking row for central's audit trail.
	SubmittedBy string
	// AttemptGrace is how long the immediate attempt may take. The buffer
	// row is written with the tracking row but is not forwarded before this
	// has passed: if the caller dies mid-attempt, central still retries it.
	AttemptGrace time.Duration
	// RequestHash identifies the request when OperationID was derived from
	// an idempotency key (see NewMessage.RequestHash).
	RequestHash []byte
	// TraceParent: see NewMessage.TraceParent.
	TraceParent string
}

// Attempt is the outcome of one delivery attempt of a cached call, or an
// operator's retry or discard.
type Attempt struct {
	OperationID string
	Status      contract.Status
	RetryCount  int
	LastError   string
	// At is when the attempt ran; nil for an operator action.
	At *time.Time
	// NextAttemptAt is when a Retrying operation is tried again.
	NextAttemptAt *time.Time
	// Immediate marks the outcome of the site's immediate attempt. It
	// applies only to a row no retry has touched: an immediate attempt that
	// outlasted its grace may finish after central began retrying.
	Immediate bool
}

// ErrTerminalOperation is returned for a change to a tracking row that is
// already Delivered, Failed or Discarded.
var ErrTerminalOperation = errors.New("operation is terminal")

// ErrSuperseded is returned for an immediate attempt's outcome that arrives
// after a retry already changed the row; the row is returned unchanged.
var ErrSuperseded = errors.New("a retry already changed the operation")

const trackingColumns = `operation_id, kind, target, status, retry_count, last_error, site_id, node,
	instance, script, created_at, updated_at, last_attempt_at, next_attempt_at, terminal_at, seq, submitted_by`

// BeginOperation commits a cached call's tracking row (Pending) and its
// buffer row together, before the immediate attempt: from here on the call
// cannot be lost. A request its idempotency key already began returns the
// operation's row as it is now, with ErrReplayed.
func (s *Store) BeginOperation(ctx context.Context, op NewOperation) (contract.TrackedOperation, error) {
	now := rowTime(s.now())
	var row contract.TrackedOperation
	buffered := []NewMessage{{
		ID: op.OperationID, Category: op.Kind, TrackedOperationID: op.OperationID, Target: op.Target,
		Payload: op.Payload, Provenance: op.Provenance, NotBefore: now.Add(op.AttemptGrace), TraceParent: op.TraceParent,
	}}
	hashes := payloadHashes(buffered)
	err := s.inTx(ctx, "begin operation "+op.OperationID, func(tx *writeTx) error {
		if replayed, err := claimKey(tx, NewMessage{ID: op.OperationID, RequestHash: op.RequestHash}, now); err != nil || replayed {
			if err == nil {
				if row, err = getTracking(tx, op.OperationID); err == nil {
					err = ErrReplayed
				}
			}
			return err
		}
		seq, err := nextSeq(tx)
		if err != nil {
			return err
		}
		row = contract.TrackedOperation{
			OperationID: op.OperationID, Kind: op.Kind, Target: op.Target, Status: contract.StatusPending,
			SourceSiteID: op.Provenance.SiteID, SourceNode: op.Provenance.Node,
			SourceInstance: op.Provenance.Instance, SourceScript: op.Provenance.Script, SubmittedBy: op.SubmittedBy,
			CreatedAt: now, UpdatedAt: now, Seq: seq,
		}
		if err := insertTracking(tx, row); err != nil {
			return err
		}
		_, err = appendMessages(tx, now, buffered, hashes)
		return err
	})
	if err == nil {
		s.signalChanged()
	}
	return row, err
}

// TrackingChanged is signalled after tracking changes commit in this
// process (several changes may share one signal). Changes made by other
// processes on the same file are not signalled.
func (s *Store) TrackingChanged() <-chan struct{} { return s.changed }

func (s *Store) signalChanged() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// RecordAttempt writes an attempt's outcome to the tracking row and, in the
// same transaction, to the buffer: a terminal outcome removes the buffer
// row, Pending (a failed immediate attempt) makes it due for hand-off at
// once, anything else mirrors the status on it. A terminal row never changes.
func (s *Store) RecordAttempt(ctx context.Context, a Attempt) (contract.TrackedOperation, error) {
	now := rowTime(s.now())
	var row contract.TrackedOperation
	err := s.inTx(ctx, "record attempt of "+a.OperationID, func(tx *writeTx) error {
		current, err := getTracking(tx, a.OperationID)
		if err != nil {
			return err
		}
		if current.Status.Terminal() {
			return fmt.Errorf("operation %s is already %s: %w", a.OperationID, current.Status, ErrTerminalOperation)
		}
		if a.Immediate && (current.Status != contract.StatusPending || current.LastAttemptAt != nil) {
			row = current
			return fmt.Errorf("immediate attempt of %s: %w", a.OperationID, ErrSuperseded)
		}
		seq, err := nextSeq(tx)
		if err != nil {
			return err
		}
		row = applyAttempt(current, a, now, seq)
		if err := updateTracking(tx, row); err != nil {
			return err
		}
		return updateBufferFor(tx, row, now)
	})
	if err == nil {
		s.signalChanged()
	}
	return row, err
}

// rowTime is t as a tracking row keeps it: UTC, to the microsecond, which
// both central stores hold exactly (SQL Server's DATETIME2 to 100 ns), so
// the site_calls mirror equals the row.
func rowTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// applyAttempt is the tracking row after attempt a.
func applyAttempt(row contract.TrackedOperation, a Attempt, now time.Time, seq int64) contract.TrackedOperation {
	row.Status, row.RetryCount, row.LastError = a.Status, a.RetryCount, truncate(a.LastError, maxErrorChars)
	if a.At != nil {
		at := rowTime(*a.At)
		row.LastAttemptAt = &at
	}
	row.NextAttemptAt = nil
	if a.NextAttemptAt != nil {
		next := rowTime(*a.NextAttemptAt)
		row.NextAttemptAt = &next
	}
	if row.Status.Terminal() {
		row.TerminalAt = &now
	}
	row.UpdatedAt, row.Seq = now, seq
	return row
}

// bufferOfOperation selects a cached call's buffer row; its one argument,
// last in each statement, is the operation id. buffer_operation is a
// partial index (notifications, which have no operation id, stay out of
// it), and SQLite uses a partial index only for a query that states the
// index's condition: without its "not empty" test every lookup scanned
// the whole buffer, in the writer's transaction too (outpost bench --only
// status: a Status request on 1,000,000 buffered rows took tens of
// milliseconds).
const bufferOfOperation = `tracked_operation_id = ? AND tracked_operation_id != ''`

// The statements that read or change a cached call's buffer row.
const (
	deleteCallBufferSQL  = `DELETE FROM buffer WHERE ` + bufferOfOperation
	rescheduleCallSQL    = `UPDATE buffer SET last_error = ?, last_attempt_at = ?, next_attempt_at = ? WHERE ` + bufferOfOperation
	recordCallAttemptSQL = `UPDATE buffer SET status = ?, retry_count = ?, last_error = ?, last_attempt_at = ? WHERE ` + bufferOfOperation
	callPayloadSQL       = `SELECT payload FROM buffer WHERE ` + bufferOfOperation
	callHandedOffSQL     = `SELECT handed_off FROM buffer WHERE ` + bufferOfOperation
)

func updateBufferFor(tx *writeTx, row contract.TrackedOperation, now time.Time) error {
	var err error
	switch {
	case row.Status.Terminal():
		_, err = tx.exec(deleteCallBufferSQL, row.OperationID)
	case row.Status == contract.StatusPending:
		_, err = tx.exec(rescheduleCallSQL, row.LastError, nanosPtr(row.LastAttemptAt), now.UnixNano(), row.OperationID)
	default:
		_, err = tx.exec(recordCallAttemptSQL, string(row.Status), row.RetryCount, row.LastError,
			nanosPtr(row.LastAttemptAt), row.OperationID)
	}
	if err != nil {
		return fmt.Errorf("update buffer row of %s: %w", row.OperationID, err)
	}
	return nil
}

// GetOperation reads one tracking row; ErrNotFound when there is none.
func (s *Store) GetOperation(ctx context.Context, id string) (contract.TrackedOperation, error) {
	row, err := scanTracking(s.reads.operation.QueryRowContext(byKey(ctx), id))
	if errors.Is(err, sql.ErrNoRows) {
		return contract.TrackedOperation{}, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return contract.TrackedOperation{}, fmt.Errorf("read operation %s: %w", id, err)
	}
	return row, nil
}

// GetOperationAndPayload reads one tracking row and, while the site still
// buffers the call (until it is delivered or discarded), its payload, in
// one statement: a Status request reads both, and a second statement was a
// third of its time in the daemon (perf, outpost bench --only status).
// payload is nil when the buffer row is gone; ErrNotFound when there is no
// tracking row.
func (s *Store) GetOperationAndPayload(ctx context.Context, id string) (row contract.TrackedOperation, payload []byte, err error) {
	row, err = scanTracking(s.reads.operationAndPayload.QueryRowContext(byKey(ctx), id), &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return contract.TrackedOperation{}, nil, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return contract.TrackedOperation{}, nil, fmt.Errorf("read operation %s and its payload: %w", id, err)
	}
	return row, payload, nil
}

// OperationPayload is the buffered payload of a cached call still to deliver.
func (s *Store) OperationPayload(ctx context.Context, id string) ([]byte, error) {
	var payload []byte
	err := s.reads.callPayload.QueryRowContext(byKey(ctx), id).Scan(&payload)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("payload of operation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read payload of operation %s: %w", id, err)
	}
	return payload, nil
}

// ChangesSince returns up to limit tracking rows changed after seq, each
// as it stands now, in change order: central's reconciliation pull.
func (s *Store) ChangesSince(ctx context.Context, seq int64, limit int) ([]contract.TrackedOperation, error) {
	rows, err := s.queryTracking(ctx, `WHERE seq > ? ORDER BY seq LIMIT ?`, seq, limit)
	if err != nil {
		return nil, fmt.Errorf("read tracking changes after %d: %w", seq, err)
	}
	return rows, nil
}

// TelemetryChanges returns up to limit tracking changes after seq, each as
// the row stood after it, in change order: telemetry's outbox. A row that
// changed three times since the last send is three changes, so central
// audits every attempt, however far telemetry fell behind.
func (s *Store) TelemetryChanges(ctx context.Context, seq int64, limit int) ([]contract.TrackedOperation, error) {
	rows, err := s.queryRows(ctx, `SELECT `+trackingColumns+` FROM tracking_changes WHERE seq > ? ORDER BY seq LIMIT ?`, seq, limit)
	if err != nil {
		return nil, fmt.Errorf("read telemetry changes after %d: %w", seq, err)
	}
	return rows, nil
}

// dueOnSiteClause selects the calls due on the site from the tracking rows
// due (a partial index), probing each one's buffer row. Selecting the
// buffer's unhanded rows first read every buffered notification too: with
// central away and 50,000 of them it took 55 ms of every second's poll,
// and time in proportion to the backlog.
const dueOnSiteClause = `WHERE status IN ('Pending', 'Retrying') AND next_attempt_at <= ?
	AND EXISTS (SELECT 1 FROM buffer WHERE buffer.tracked_operation_id = tracking.operation_id
		AND buffer.tracked_operation_id != '' AND buffer.handed_off = 0)
	ORDER BY next_attempt_at LIMIT ?`

// DueOnSite returns up to limit cached calls central has not taken over (no
// acknowledged hand-off) whose next retry is due at now, the most overdue
// first: while central is unreachable the site retries them itself.
func (s *Store) DueOnSite(ctx context.Context, now time.Time, limit int) ([]contract.TrackedOperation, error) {
	rows, err := s.queryTracking(ctx, dueOnSiteClause, rowTime(now).UnixNano(), limit)
	if err != nil {
		return nil, fmt.Errorf("read calls due on the site: %w", err)
	}
	return rows, nil
}

// HandedOff reports whether central acknowledged the hand-off of a cached
// call (its workflow drives the retries from then on); false for a call
// with no buffer row.
func (s *Store) HandedOff(ctx context.Context, operationID string) (bool, error) {
	var handedOff bool
	err := s.db.QueryRowContext(ctx, callHandedOffSQL, operationID).Scan(&handedOff)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read hand-off of operation %s: %w", operationID, err)
	}
	return handedOff, nil
}

// ListOperations returns every tracking row, by id (tests and tools).
func (s *Store) ListOperations(ctx context.Context) ([]contract.TrackedOperation, error) {
	rows, err := s.queryTracking(ctx, `ORDER BY operation_id`)
	if err != nil {
		return nil, fmt.Errorf("list operations: %w", err)
	}
	return rows, nil
}

// queryTracking reads the tracking rows that the clause (WHERE, ORDER BY,
// LIMIT) selects.
func (s *Store) queryTracking(ctx context.Context, clause string, args ...any) ([]contract.TrackedOperation, error) {
	return s.queryRows(ctx, `SELECT `+trackingColumns+` FROM tracking `+clause, args...)
}

// queryRows runs query, which selects trackingColumns, and scans its rows.
func (s *Store) queryRows(ctx context.Context, query string, args ...any) ([]contract.TrackedOperation, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []contract.TrackedOperation
	for rows.Next() {
		row, err := scanTracking(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// TelemetryCursor is the last change central has persisted from telemetry.
func (s *Store) TelemetryCursor(ctx context.Context) (int64, error) {
	return s.metaValue(ctx, "telemetry_cursor")
}

// LastSeq is the highest change number this store has given out (0 for a
// new store); purging rows never lowers it.
func (s *Store) LastSeq(ctx context.Context) (int64, error) {
	return s.metaValue(ctx, "tracking_seq")
}

// StoreID names this store file: random, drawn when the file was created
// (or first opened by a version that knew it), the same on every open.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	id, err := s.metaValue(ctx, "store_id")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%016x", uint64(id)), nil
}

func (s *Store) metaValue(ctx context.Context, name string) (int64, error) {
	var v int64
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = ?`, name).Scan(&v); err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	return v, nil
}

// AdvanceTelemetryCursor moves the cursor to seq once central persisted
// every change up to it, and forgets those changes; it never moves back.
func (s *Store) AdvanceTelemetryCursor(ctx context.Context, seq int64) error {
	return s.inTx(ctx, fmt.Sprintf("advance telemetry cursor to %d", seq), func(tx *writeTx) error {
		if _, err := tx.exec(`UPDATE meta SET value = ? WHERE name = 'telemetry_cursor' AND value < ?`, seq, seq); err != nil {
			return err
		}
		_, err := tx.exec(`DELETE FROM tracking_changes WHERE seq <= ?`, seq)
		return err
	})
}

// TelemetryBacklog counts tracking changes central has not persisted yet,
// stopping at limit (the caller only needs to know if a batch is full).
func (s *Store) TelemetryBacklog(ctx context.Context, limit int) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM tracking_changes
		WHERE seq > (SELECT value FROM meta WHERE name = 'telemetry_cursor') LIMIT ?)`, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count telemetry backlog: %w", err)
	}
	return n, nil
}

// PurgeTerminal deletes up to limit tracking rows that became terminal
// before cutoff and whose final state central has (telemetry moved past
// it), and returns how many it deleted. Non-terminal rows are never purged;
// a terminal row waits while central is away longer than the retention, so
// site_calls never keeps an outdated state for good.
func (s *Store) PurgeTerminal(ctx context.Context, cutoff time.Time, limit int) (int, error) {
	var purged int64
	err := s.inTx(ctx, "purge tracking rows terminal before "+cutoff.Format(time.RFC3339), func(tx *writeTx) (err error) {
		purged, err = tx.execCount(`DELETE FROM tracking WHERE operation_id IN (
			SELECT operation_id FROM tracking WHERE terminal_at IS NOT NULL AND terminal_at < ?
			AND seq <= (SELECT value FROM meta WHERE name = 'telemetry_cursor') LIMIT ?)`,
			cutoff.UnixNano(), limit)
		return err
	})
	return int(purged), err
}

// inTx runs fn as one write (see committer): its changes commit together,
// possibly with other callers' writes; what names it in errors.
func (s *Store) inTx(ctx context.Context, what string, fn func(*writeTx) error) error {
	if err := s.writer.do(ctx, 1, fn); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// nextSeq takes the next site-wide change number. It is a counter, not
// max(seq)+1, so purging the newest rows never reuses a number.
func nextSeq(tx *writeTx) (int64, error) {
	var seq int64
	err := tx.execReturning(`UPDATE meta SET value = value + 1 WHERE name = 'tracking_seq' RETURNING value`).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("next change number: %w", err)
	}
	return seq, nil
}

func insertTracking(tx *writeTx, r contract.TrackedOperation) error {
	_, err := tx.exec(`INSERT INTO tracking (`+trackingColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, trackingValues(r)...)
	if err != nil {
		return fmt.Errorf("insert tracking row %s: %w", r.OperationID, err)
	}
	return recordChange(tx, r)
}

// recordChange keeps r, the row as change r.Seq left it, for telemetry.
func recordChange(tx *writeTx, r contract.TrackedOperation) error {
	_, err := tx.exec(`INSERT INTO tracking_changes (`+trackingColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, trackingValues(r)...)
	if err != nil {
		return fmt.Errorf("record change %d of %s: %w", r.Seq, r.OperationID, err)
	}
	return nil
}

func updateTracking(tx *writeTx, r contract.TrackedOperation) error {
	_, err := tx.exec(`UPDATE tracking SET status = ?, retry_count = ?, last_error = ?,
		updated_at = ?, last_attempt_at = ?, next_attempt_at = ?, terminal_at = ?, seq = ?
		WHERE operation_id = ?`, string(r.Status), r.RetryCount, r.LastError, r.UpdatedAt.UnixNano(),
		nanosPtr(r.LastAttemptAt), nanosPtr(r.NextAttemptAt), nanosPtr(r.TerminalAt), r.Seq, r.OperationID)
	if err != nil {
		return fmt.Errorf("update tracking row %s: %w", r.OperationID, err)
	}
	return recordChange(tx, r)
}

func getTracking(tx *writeTx, id string) (contract.TrackedOperation, error) {
	row, err := scanTracking(tx.queryRow(`SELECT `+trackingColumns+` FROM tracking WHERE operation_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return contract.TrackedOperation{}, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return contract.TrackedOperation{}, fmt.Errorf("read operation %s: %w", id, err)
	}
	return row, nil
}

func trackingValues(r contract.TrackedOperation) []any {
	return []any{r.OperationID, r.Kind, r.Target, string(r.Status), r.RetryCount, r.LastError,
		r.SourceSiteID, r.SourceNode, r.SourceInstance, r.SourceScript, r.CreatedAt.UnixNano(),
		r.UpdatedAt.UnixNano(), nanosPtr(r.LastAttemptAt), nanosPtr(r.NextAttemptAt), nanosPtr(r.TerminalAt), r.Seq, r.SubmittedBy}
}

// scanTracking scans the trackingColumns of row, then into more the
// columns a query selects after them.
func scanTracking(row scanner, more ...any) (contract.TrackedOperation, error) {
	var r contract.TrackedOperation
	var status string
	var created, updated int64
	var lastAttempt, nextAttempt, terminal sql.NullInt64
	dest := []any{&r.OperationID, &r.Kind, &r.Target, &status, &r.RetryCount, &r.LastError,
		&r.SourceSiteID, &r.SourceNode, &r.SourceInstance, &r.SourceScript, &created, &updated,
		&lastAttempt, &nextAttempt, &terminal, &r.Seq, &r.SubmittedBy}
	err := row.Scan(append(dest, more...)...)
	if err != nil {
		return contract.TrackedOperation{}, err
	}
	r.Status = contract.Status(status)
	r.CreatedAt, r.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	r.LastAttemptAt, r.NextAttemptAt, r.TerminalAt = timeOf(lastAttempt), timeOf(nextAttempt), timeOf(terminal)
	return r, nil
}

func nanosPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func timeOf(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := time.Unix(0, n.Int64).UTC()
	return &t
}

func truncate(s string, max int) string {
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}
