package centralstore

import (
	"context"
	"fmt"

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
	},
	insertIfMissing: `INSERT INTO notifications (` + notificationColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (notification_id) DO NOTHING`,
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
