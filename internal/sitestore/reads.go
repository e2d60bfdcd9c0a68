package sitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// operationSQL reads one tracking row by its operation id.
const operationSQL = `SELECT ` + trackingColumns + ` FROM tracking WHERE operation_id = ?`

// operationAndPayloadSQL reads one tracking row and its call's payload,
// NULL once the buffer row is gone (delivered or discarded). The payload's
// subquery probes the buffer_operation index, as callPayloadSQL does.
const operationAndPayloadSQL = `SELECT ` + trackingColumns + `,
	(SELECT payload FROM buffer WHERE tracked_operation_id = tracking.operation_id AND tracked_operation_id != '')
	FROM tracking WHERE operation_id = ?`

// dueSQL reads a page of the rows due for hand-off, after a cursor on
// (next_attempt_at, hlc, message_id): DueAfter's read.
const dueSQL = `SELECT ` + messageColumns + ` FROM buffer
	WHERE handed_off = 0 AND next_attempt_at <= ? AND (next_attempt_at, hlc, message_id) > (?, ?, ?)
	ORDER BY next_attempt_at, hlc, message_id LIMIT ?`

// readStatements are the reads made most often, prepared once for the
// store's life:
//   - a Status request's (GET /v1/operations/{id}: the tracking row and
//     the call's payload), and the tracking row and the payload alone,
//     which the forwarder and the on-site attempts read. Parsing them again
//     for every request cost about a fifth of it (outpost bench --only
//     status at 1,000,000 rows, alternating builds: p99 1.13 and 1.23 ms
//     unprepared, 0.80 and 0.95 ms prepared);
//   - the forwarder's sweep for due rows, which even an idle site runs
//     every poll interval (250 ms). Unprepared, SQLite parsed it twice a
//     sweep (once more after the values were bound), and an empty sweep
//     took 108 µs instead of 13 (BenchmarkDueAfterIdle); 200 simulated
//     sites spent 40% of their CPU on it (outpost bench --only fleet,
//     profiled).
type readStatements struct {
	operation, operationAndPayload, callPayload, due *sql.Stmt
}

// byKey is ctx without its cancellation, for the prepared reads of one row
// by its key, which take microseconds: on a cancellable context (every
// HTTP request's) modernc's driver and database/sql each start a goroutine
// per statement to watch it, which a Status request paid for twice.
func byKey(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

func prepareReadStatements(ctx context.Context, db *sql.DB) (*readStatements, error) {
	var r readStatements
	queries := []preparedQuery{
		{&r.operation, operationSQL}, {&r.operationAndPayload, operationAndPayloadSQL},
		{&r.callPayload, callPayloadSQL}, {&r.due, dueSQL},
	}
	if err := prepareAll(ctx, db, queries); err != nil {
		return nil, err
	}
	return &r, nil
}

func (r *readStatements) close() { closeAll(r.operation, r.operationAndPayload, r.callPayload, r.due) }

// preparedQuery is a statement to prepare and where to keep it.
type preparedQuery struct {
	stmt  **sql.Stmt
	query string
}

// prepareAll prepares every query into its stmt. If one fails, those
// already prepared are closed.
func prepareAll(ctx context.Context, db *sql.DB, queries []preparedQuery) error {
	for i, q := range queries {
		stmt, err := db.PrepareContext(ctx, q.query)
		if err != nil {
			for _, done := range queries[:i] {
				(*done.stmt).Close()
			}
			return fmt.Errorf("prepare %q: %w", q.query, err)
		}
		*q.stmt = stmt
	}
	return nil
}

// closeAll closes every statement.
func closeAll(stmts ...*sql.Stmt) {
	for _, stmt := range stmts {
		stmt.Close()
	}
}
