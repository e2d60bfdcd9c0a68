// Package dbtx runs a function inside one database transaction, for the
// site store (SQLite) and the central store (SQLite or SQL Server) alike.
package dbtx

import (
	"context"
	"database/sql"
	"fmt"
)

// Run runs fn in a transaction on db and commits it; an error from fn, or
// from begin or commit, rolls it back.
func Run(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
