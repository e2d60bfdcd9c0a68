// Package sqlitedb opens SQLite files the one way Outpost uses them.
package sqlitedb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Open opens (creating if needed) the SQLite file at path in WAL mode with
// synchronous=FULL, so a committed transaction is on disk, and a busy timeout,
// so concurrent writers wait instead of failing. Transactions begin
// IMMEDIATE: a writer takes the write lock up front and never deadlocks on
// an upgrade. pragmas ("cache_size(-65536)") apply to every connection
// after those.
func Open(ctx context.Context, path string, pragmas ...string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "busy_timeout(10000)")
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := checkWAL(ctx, db, path); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// checkWAL verifies the journal mode pragma took effect (it silently does not
// on some file systems).
func checkWAL(ctx context.Context, db *sql.DB, path string) error {
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return fmt.Errorf("open %s: read journal mode: %w", path, err)
	}
	if mode != "wal" {
		return fmt.Errorf("open %s: journal mode is %q, want wal (is the file on a local file system?)", path, mode)
	}
	return nil
}
