package centralstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// keptStatements are statements prepared once for the store's life, by
// text (database/sql then prepares each once on every connection that
// runs it). Only texts of which there are few are kept: those every
// notification runs (its insert, its status changes and their audit
// events, its row and list reads), and the full chunks of a batch write. Parsing
// those again every time was 13% of the CPU of a telemetry ingest and 6%
// of a central worker delivering notifications (outpost bench --only
// telemetry and --only e2e, profiled).
type keptStatements struct {
	mu      sync.Mutex
	byQuery map[string]*sql.Stmt
}

// prepared is query's statement on db, prepared on first use.
func (k *keptStatements) prepared(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if stmt, ok := k.byQuery[query]; ok {
		return stmt, nil
	}
	stmt, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare statement: %w", err)
	}
	if k.byQuery == nil {
		k.byQuery = map[string]*sql.Stmt{}
	}
	k.byQuery[query] = stmt
	return stmt, nil
}

func (k *keptStatements) close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for _, stmt := range k.byQuery {
		errs = append(errs, stmt.Close())
	}
	k.byQuery = nil
	return errors.Join(errs...)
}

// execKept runs query, one of the few texts the store keeps prepared, in
// tx. Bound to tx, the statement runs prepared on tx's connection:
// database/sql prepares it there once and keeps it.
func (s *Store) execKept(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	stmt, err := s.writeStmts.prepared(ctx, s.db, query)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
}

// queryRowKept reads one row with query, one of the few texts the store
// keeps prepared, on the lookups pool.
func (s *Store) queryRowKept(ctx context.Context, query string, args ...any) (*sql.Row, error) {
	stmt, err := s.readStmts.prepared(ctx, s.lookups, query)
	if err != nil {
		return nil, err
	}
	return stmt.QueryRowContext(ctx, args...), nil
}

// keptChunkRows is the most rows of a chunk shorter than full whose
// statement is kept: a status change audits one or two events. Longer
// short chunks are parsed each time (there would be a text per size).
const keptChunkRows = 2

// queryChunk runs query, a chunk of rows rows of at most full that
// returns rows, in tx: kept prepared when the chunk is full or of at most
// keptChunkRows rows.
func (s *Store) queryChunk(ctx context.Context, tx *sql.Tx, query string, rows, full int, args ...any) (*sql.Rows, error) {
	if rows != full && rows > keptChunkRows {
		return tx.QueryContext(ctx, query, args...)
	}
	stmt, err := s.writeStmts.prepared(ctx, s.db, query)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, stmt).QueryContext(ctx, args...)
}
