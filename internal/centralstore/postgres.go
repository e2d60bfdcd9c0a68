package centralstore

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// postgresDialect is the central store on PostgreSQL. Every text column
// takes the "C" collation, whatever the database's default: ids then
// compare byte by byte (UTF-8's code-point order, as SQLite and SQL
// Server's binary collation compare them), which the audit trail's range of
// event ids relies on ('0' follows '/'), and ORDER BY name lists the same
// order on every driver. Times are TIMESTAMPTZ, kept to the microsecond;
// PostgreSQL rounds finer times, so an inserted row is read back
// (exactTimes false).
var postgresDialect = dialect{
	name:        "postgres",
	placeholder: "$",
	rowLimit:    " LIMIT ?",
	schema: []string{`CREATE TABLE IF NOT EXISTS notifications (
		notification_id    TEXT COLLATE "C" PRIMARY KEY,
		type               TEXT COLLATE "C" NOT NULL,
		list_name          TEXT COLLATE "C" NOT NULL,
		subject            TEXT COLLATE "C" NOT NULL,
		body               TEXT COLLATE "C" NOT NULL,
		type_data          TEXT COLLATE "C" NOT NULL DEFAULT '',
		status             TEXT COLLATE "C" NOT NULL,
		retry_count        INTEGER NOT NULL DEFAULT 0,
		last_error         TEXT COLLATE "C" NOT NULL DEFAULT '',
		resolved_targets   TEXT COLLATE "C" NOT NULL DEFAULT 'null',
		source_site_id     TEXT COLLATE "C" NOT NULL,
		source_instance_id TEXT COLLATE "C" NOT NULL DEFAULT '',
		source_script      TEXT COLLATE "C" NOT NULL DEFAULT '',
		source_node        TEXT COLLATE "C" NOT NULL DEFAULT '',
		site_enqueued_at   TIMESTAMPTZ NOT NULL,
		created_at         TIMESTAMPTZ NOT NULL,
		last_attempt_at    TIMESTAMPTZ,
		next_attempt_at    TIMESTAMPTZ,
		delivered_at       TIMESTAMPTZ,
		terminal_at        TIMESTAMPTZ
	)`,
		// The indexes are SQLite's, for the same queries (sqlite.go says
		// which query each serves).
		`CREATE INDEX IF NOT EXISTS notifications_status_terminal ON notifications (status, terminal_at)`,
		`CREATE INDEX IF NOT EXISTS notifications_created ON notifications (created_at, notification_id)`,
		`CREATE INDEX IF NOT EXISTS notifications_status_created ON notifications (status, created_at, notification_id)`,
		`CREATE INDEX IF NOT EXISTS notifications_status_site_created ON notifications (status, source_site_id, created_at)`,
		`CREATE INDEX IF NOT EXISTS notifications_status_delivered ON notifications (status, delivered_at, source_site_id)`,
		`CREATE TABLE IF NOT EXISTS site_calls (
		operation_id    TEXT COLLATE "C" PRIMARY KEY,
		kind            TEXT COLLATE "C" NOT NULL,
		target          TEXT COLLATE "C" NOT NULL,
		status          TEXT COLLATE "C" NOT NULL,
		retry_count     INTEGER NOT NULL DEFAULT 0,
		last_error      TEXT COLLATE "C" NOT NULL DEFAULT '',
		source_site_id  TEXT COLLATE "C" NOT NULL,
		source_node     TEXT COLLATE "C" NOT NULL DEFAULT '',
		source_instance TEXT COLLATE "C" NOT NULL DEFAULT '',
		source_script   TEXT COLLATE "C" NOT NULL DEFAULT '',
		created_at      TIMESTAMPTZ NOT NULL,
		updated_at      TIMESTAMPTZ NOT NULL,
		last_attempt_at TIMESTAMPTZ,
		next_attempt_at TIMESTAMPTZ,
		terminal_at     TIMESTAMPTZ,
		seq             BIGINT NOT NULL,
		mirrored_at     TIMESTAMPTZ NOT NULL
	)`,
		`CREATE INDEX IF NOT EXISTS site_calls_site_status ON site_calls (source_site_id, status)`,
		`CREATE INDEX IF NOT EXISTS site_calls_status_terminal ON site_calls (status, terminal_at)`,
		`CREATE INDEX IF NOT EXISTS site_calls_status_site_created ON site_calls (status, source_site_id, kind, created_at)`,
		`CREATE INDEX IF NOT EXISTS site_calls_status_created ON site_calls (status, created_at, source_site_id)`,
		`CREATE INDEX IF NOT EXISTS site_calls_created ON site_calls (created_at, operation_id)`,
		`CREATE INDEX IF NOT EXISTS site_calls_site_created ON site_calls (source_site_id, created_at, operation_id, status)`,
		`CREATE INDEX IF NOT EXISTS site_calls_target_created ON site_calls (target, created_at, operation_id, status)`,
		`CREATE TABLE IF NOT EXISTS site_cursors (
		site_id        TEXT COLLATE "C" PRIMARY KEY,
		reconciled_seq BIGINT NOT NULL,
		updated_at     TIMESTAMPTZ NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS audit_log (
		event_id     TEXT COLLATE "C" PRIMARY KEY,
		operation_id TEXT COLLATE "C" NOT NULL,
		kind         TEXT COLLATE "C" NOT NULL,
		site_id      TEXT COLLATE "C" NOT NULL DEFAULT '',
		event        TEXT COLLATE "C" NOT NULL,
		status       TEXT COLLATE "C" NOT NULL DEFAULT '',
		detail       TEXT COLLATE "C" NOT NULL DEFAULT '',
		operator     TEXT COLLATE "C" NOT NULL DEFAULT '',
		reason       TEXT COLLATE "C" NOT NULL DEFAULT '',
		at           TIMESTAMPTZ NOT NULL,
		source_node  TEXT COLLATE "C",
		carried      TEXT COLLATE "C"
	)`,
		// JSON of the events a row carries (AuditEvent.Carries), added to
		// stores created before it; NULL on their rows.
		`ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS carried TEXT COLLATE "C"`,
		`CREATE INDEX IF NOT EXISTS audit_log_definitions ON audit_log (operation_id, at) WHERE ` + definitionKinds,
		`CREATE INDEX IF NOT EXISTS audit_log_at_node ON audit_log (at, source_node)`,
		`CREATE TABLE IF NOT EXISTS notification_lists (
		name        TEXT COLLATE "C" PRIMARY KEY,
		type        TEXT COLLATE "C" NOT NULL,
		targets     TEXT COLLATE "C" NOT NULL,
		channel     TEXT COLLATE "C" NOT NULL DEFAULT '',
		type_data   TEXT COLLATE "C" NOT NULL DEFAULT '{}',
		description TEXT COLLATE "C" NOT NULL DEFAULT '',
		updated_by  TEXT COLLATE "C" NOT NULL DEFAULT '',
		updated_at  TIMESTAMPTZ NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS delivery_channels (
		name        TEXT COLLATE "C" PRIMARY KEY,
		type        TEXT COLLATE "C" NOT NULL,
		settings    TEXT COLLATE "C" NOT NULL DEFAULT '{}',
		description TEXT COLLATE "C" NOT NULL DEFAULT '',
		updated_by  TEXT COLLATE "C" NOT NULL DEFAULT '',
		updated_at  TIMESTAMPTZ NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS airgap_imports (
		bundle_id   TEXT COLLATE "C" PRIMARY KEY,
		site_id     TEXT COLLATE "C" NOT NULL,
		nodes       TEXT COLLATE "C" NOT NULL,
		entries     INTEGER NOT NULL,
		imported    INTEGER NOT NULL,
		duplicates  INTEGER NOT NULL,
		skipped     INTEGER NOT NULL,
		chain_heads TEXT COLLATE "C" NOT NULL,
		imported_by TEXT COLLATE "C" NOT NULL,
		imported_at TIMESTAMPTZ NOT NULL,
		bytes       BIGINT
	)`,
		`CREATE TABLE IF NOT EXISTS airgap_import_runs (
		run_id           TEXT COLLATE "C" PRIMARY KEY,
		outcome          TEXT COLLATE "C" NOT NULL,
		bundle_ids       TEXT COLLATE "C" NOT NULL,
		entries          BIGINT NOT NULL,
		imported         BIGINT NOT NULL,
		duplicates       BIGINT NOT NULL,
		skipped          BIGINT NOT NULL,
		duration_seconds DOUBLE PRECISION NOT NULL,
		imported_by      TEXT COLLATE "C" NOT NULL,
		run_at           TIMESTAMPTZ NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS airgap_import_conflicts (
		run_id        TEXT COLLATE "C" NOT NULL,
		conflict_type TEXT COLLATE "C" NOT NULL,
		conflicts     BIGINT NOT NULL,
		PRIMARY KEY (run_id, conflict_type)
	)`,
	},
	// The lock is held to the end of the schema's transaction; its key is
	// any number no other user of the database takes.
	schemaLock:      `SELECT pg_advisory_xact_lock(hashtext('outpost central store schema'))`,
	insertIfMissing: insertNotificationOnConflict,
	upsertSiteCalls: oneStatement(postgresUpsertSiteCalls),
	// 500 rows are 8,500 parameters, well under PostgreSQL's 65,535.
	siteCallChunk:     500,
	insertAuditEvents: insertAuditEventsOnConflict,
	auditChunk:        500,
	deleteBatch:       deleteBatchBySubquery,
	advanceCursor:     advanceCursorOnConflict,
}

// postgresUpsertSiteCalls is upsertSiteCallsOnConflict returning each row
// written and whether it was inserted: a row the statement inserted has no
// xmax, where the row DO UPDATE wrote carries the lock the conflict took on
// it (xmax = 0 is how PostgreSQL tells an insert from an update; storetest's
// SiteCallsKeepHighestSeq checks it, TestPostgres here).
func postgresUpsertSiteCalls(rows int) string {
	return upsertSiteCallsOnConflict(rows) + `
		RETURNING operation_id, xmax = 0`
}

// OpenPostgres opens the central store on PostgreSQL (a postgres:// URL or
// key=value DSN, driver pgx) and creates its tables.
func OpenPostgres(ctx context.Context, dsn string) (*Store, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("open central store on postgresql: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to postgresql: %w", err)
	}
	s := &Store{db: db, reads: db, lookups: db, purges: db, dialect: postgresDialect}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}
