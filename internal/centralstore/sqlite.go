package centralstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

var sqliteDialect = dialect{
	name: "sqlite",
	schema: []string{`CREATE TABLE IF NOT EXISTS notifications (
		notification_id    TEXT PRIMARY KEY,
		type               TEXT NOT NULL,
		list_name          TEXT NOT NULL,
		subject            TEXT NOT NULL,
		body               TEXT NOT NULL,
		type_data          TEXT NOT NULL DEFAULT '',
		status             TEXT NOT NULL,
		retry_count        INTEGER NOT NULL DEFAULT 0,
		last_error         TEXT NOT NULL DEFAULT '',
		resolved_targets   TEXT NOT NULL DEFAULT 'null',
		source_site_id     TEXT NOT NULL,
		source_instance_id TEXT NOT NULL DEFAULT '',
		source_script      TEXT NOT NULL DEFAULT '',
		source_node        TEXT NOT NULL DEFAULT '',
		site_enqueued_at   DATETIME NOT NULL,
		created_at         DATETIME NOT NULL,
		last_attempt_at    DATETIME,
		next_attempt_at    DATETIME,
		delivered_at       DATETIME
	)`,
		`CREATE INDEX IF NOT EXISTS notifications_status ON notifications (status, source_site_id)`,
		`CREATE TABLE IF NOT EXISTS site_calls (
		operation_id    TEXT PRIMARY KEY,
		kind            TEXT NOT NULL,
		target          TEXT NOT NULL,
		status          TEXT NOT NULL,
		retry_count     INTEGER NOT NULL DEFAULT 0,
		last_error      TEXT NOT NULL DEFAULT '',
		source_site_id  TEXT NOT NULL,
		source_node     TEXT NOT NULL DEFAULT '',
		source_instance TEXT NOT NULL DEFAULT '',
		source_script   TEXT NOT NULL DEFAULT '',
		created_at      DATETIME NOT NULL,
		updated_at      DATETIME NOT NULL,
		last_attempt_at DATETIME,
		next_attempt_at DATETIME,
		terminal_at     DATETIME,
		seq             INTEGER NOT NULL,
		mirrored_at     DATETIME NOT NULL
	)`,
		`CREATE INDEX IF NOT EXISTS site_calls_site_status ON site_calls (source_site_id, status)`,
		`CREATE INDEX IF NOT EXISTS site_calls_status_updated ON site_calls (status, updated_at)`,
		`CREATE TABLE IF NOT EXISTS site_cursors (
		site_id        TEXT PRIMARY KEY,
		reconciled_seq INTEGER NOT NULL,
		updated_at     DATETIME NOT NULL
	)`,
	},
	insertIfMissing: `INSERT INTO notifications (` + notificationColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (notification_id) DO NOTHING`,
	upsertSiteCalls: sqliteUpsertSiteCalls,
	// 500 rows are 8,500 variables, well under SQLite's 32,766.
	siteCallChunk: 500,
	advanceCursor: `INSERT INTO site_cursors (site_id, reconciled_seq, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (site_id) DO UPDATE SET reconciled_seq = excluded.reconciled_seq, updated_at = excluded.updated_at
		WHERE excluded.reconciled_seq > site_cursors.reconciled_seq`,
}

// sqliteUpsertSiteCalls skips the update for a row whose seq is not higher,
// and SQLite then counts it as unchanged.
func sqliteUpsertSiteCalls(rows int) string {
	return `INSERT INTO site_calls (` + strings.Join(siteCallColumns, ", ") + `)
		VALUES ` + valueRows(rows) + `
		ON CONFLICT (operation_id) DO UPDATE SET ` + siteCallAssignments("excluded") + `
		WHERE excluded.seq > site_calls.seq`
}

// OpenSQLite opens (creating if needed) the central store in a SQLite file.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("central store: %w", err)
	}
	s := &Store{db: db, dialect: sqliteDialect}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}
