package centralstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// chunkStatements are the statements of full chunks (siteCallChunk rows
// of site_calls, auditChunk audit events), prepared once for the store's
// life. A full chunk's statement is the same text every time, and parsing
// its thousands of placeholders again for every chunk was 13% of the CPU
// of a telemetry ingest (outpost bench --only telemetry, profiled). A
// shorter chunk, of which there are as many texts as sizes, is parsed
// each time.
type chunkStatements struct {
	mu      sync.Mutex
	byQuery map[string]*sql.Stmt
}

// execChunk runs query, a chunk's statement, in tx; full says the chunk
// has the dialect's full size.
func (s *Store) execChunk(ctx context.Context, tx *sql.Tx, query string, full bool, args ...any) (sql.Result, error) {
	if !full {
		return tx.ExecContext(ctx, query, args...)
	}
	stmt, err := s.chunks.prepared(ctx, s.db, query)
	if err != nil {
		return nil, err
	}
	// Bound to tx, the statement runs prepared on tx's connection: database/sql
	// prepares it there once and keeps it.
	return tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
}

// prepared is query's statement, prepared on first use.
func (c *chunkStatements) prepared(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if stmt, ok := c.byQuery[query]; ok {
		return stmt, nil
	}
	stmt, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare a full chunk's statement: %w", err)
	}
	if c.byQuery == nil {
		c.byQuery = map[string]*sql.Stmt{}
	}
	c.byQuery[query] = stmt
	return stmt, nil
}

func (c *chunkStatements) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, stmt := range c.byQuery {
		errs = append(errs, stmt.Close())
	}
	c.byQuery = nil
	return errors.Join(errs...)
}
