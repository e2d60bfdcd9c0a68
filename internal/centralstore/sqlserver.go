package centralstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	_ "github.com/microsoft/go-mssqldb" // registers the "sqlserver" driver
)

var sqlServerDialect = dialect{
	name:        "sqlserver",
	placeholder: "@p",
	// SQL Server has no LIMIT.
	rowLimit: " OFFSET 0 ROWS FETCH NEXT ? ROWS ONLY",
	schema: []string{`IF OBJECT_ID(N'notifications', N'U') IS NULL
	CREATE TABLE notifications (
		notification_id    VARCHAR(64) NOT NULL PRIMARY KEY,
		type               VARCHAR(32) NOT NULL,
		list_name          NVARCHAR(256) NOT NULL,
		subject            NVARCHAR(1000) NOT NULL,
		body               NVARCHAR(MAX) NOT NULL,
		type_data          NVARCHAR(MAX) NOT NULL DEFAULT '',
		status             VARCHAR(16) NOT NULL,
		retry_count        INT NOT NULL DEFAULT 0,
		last_error         NVARCHAR(MAX) NOT NULL DEFAULT '',
		resolved_targets   NVARCHAR(MAX) NOT NULL DEFAULT 'null',
		source_site_id     NVARCHAR(128) NOT NULL,
		source_instance_id NVARCHAR(256) NOT NULL DEFAULT '',
		source_script      NVARCHAR(256) NOT NULL DEFAULT '',
		source_node        VARCHAR(64) NOT NULL DEFAULT '',
		site_enqueued_at   DATETIME2 NOT NULL,
		created_at         DATETIME2 NOT NULL,
		last_attempt_at    DATETIME2 NULL,
		next_attempt_at    DATETIME2 NULL,
		delivered_at       DATETIME2 NULL,
		terminal_at        DATETIME2 NULL
	)`,
		// operation_id is NVARCHAR, the type of the driver's string
		// parameters, so the MERGE join seeks the key without converting
		// it; the binary collation makes ids case-sensitive and orders them
		// by code point, as SQLite does.
		`IF OBJECT_ID(N'site_calls', N'U') IS NULL
	CREATE TABLE site_calls (
		operation_id    NVARCHAR(64) COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY,
		kind            VARCHAR(32) NOT NULL,
		target          NVARCHAR(256) NOT NULL,
		status          VARCHAR(16) NOT NULL,
		retry_count     INT NOT NULL DEFAULT 0,
		last_error      NVARCHAR(MAX) NOT NULL DEFAULT '',
		source_site_id  NVARCHAR(128) NOT NULL,
		source_node     VARCHAR(64) NOT NULL DEFAULT '',
		source_instance NVARCHAR(256) NOT NULL DEFAULT '',
		source_script   NVARCHAR(256) NOT NULL DEFAULT '',
		created_at      DATETIME2 NOT NULL,
		updated_at      DATETIME2 NOT NULL,
		last_attempt_at DATETIME2 NULL,
		next_attempt_at DATETIME2 NULL,
		terminal_at     DATETIME2 NULL,
		seq             BIGINT NOT NULL,
		mirrored_at     DATETIME2 NOT NULL
	)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'site_calls_site_status')
	CREATE INDEX site_calls_site_status ON site_calls (source_site_id, status)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'site_calls_status_terminal')
	CREATE INDEX site_calls_status_terminal ON site_calls (status, terminal_at)`,
		`IF OBJECT_ID(N'site_cursors', N'U') IS NULL
	CREATE TABLE site_cursors (
		site_id        NVARCHAR(128) NOT NULL PRIMARY KEY,
		reconciled_seq BIGINT NOT NULL,
		updated_at     DATETIME2 NOT NULL
	)`,
		// Ids are NVARCHAR with a binary collation, like site_calls.
		`IF OBJECT_ID(N'audit_log', N'U') IS NULL
	CREATE TABLE audit_log (
		event_id     NVARCHAR(256) COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY,
		operation_id NVARCHAR(64) COLLATE Latin1_General_BIN2 NOT NULL,
		kind         VARCHAR(32) NOT NULL,
		site_id      NVARCHAR(128) NOT NULL DEFAULT '',
		event        VARCHAR(32) NOT NULL,
		status       VARCHAR(16) NOT NULL DEFAULT '',
		detail       NVARCHAR(MAX) NOT NULL DEFAULT '',
		operator     NVARCHAR(256) NOT NULL DEFAULT '',
		reason       NVARCHAR(MAX) NOT NULL DEFAULT '',
		at           DATETIME2 NOT NULL
	)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'audit_log_operation')
	CREATE INDEX audit_log_operation ON audit_log (operation_id, at)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'audit_log_at')
	CREATE INDEX audit_log_at ON audit_log (at)`,
		`IF OBJECT_ID(N'notification_lists', N'U') IS NULL
	CREATE TABLE notification_lists (
		name        NVARCHAR(64) COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY,
		type        VARCHAR(32) NOT NULL,
		targets     NVARCHAR(MAX) NOT NULL,
		channel     NVARCHAR(64) NOT NULL DEFAULT '',
		type_data   NVARCHAR(MAX) NOT NULL DEFAULT '{}',
		description NVARCHAR(MAX) NOT NULL DEFAULT '',
		updated_by  NVARCHAR(256) NOT NULL DEFAULT '',
		updated_at  DATETIME2 NOT NULL
	)`,
		`IF OBJECT_ID(N'delivery_channels', N'U') IS NULL
	CREATE TABLE delivery_channels (
		name        NVARCHAR(64) COLLATE Latin1_General_BIN2 NOT NULL PRIMARY KEY,
		type        VARCHAR(32) NOT NULL,
		settings    NVARCHAR(MAX) NOT NULL DEFAULT '{}',
		description NVARCHAR(MAX) NOT NULL DEFAULT '',
		updated_by  NVARCHAR(256) NOT NULL DEFAULT '',
		updated_at  DATETIME2 NOT NULL
	)`,
		`IF OBJECT_ID(N'airgap_imports', N'U') IS NULL
	CREATE TABLE airgap_imports (
		bundle_id   VARCHAR(64) NOT NULL PRIMARY KEY,
		site_id     NVARCHAR(64) NOT NULL,
		nodes       NVARCHAR(MAX) NOT NULL,
		entries     INT NOT NULL,
		imported    INT NOT NULL,
		duplicates  INT NOT NULL,
		skipped     INT NOT NULL,
		chain_heads NVARCHAR(MAX) NOT NULL,
		imported_by NVARCHAR(256) NOT NULL,
		imported_at DATETIME2 NOT NULL,
		bytes       BIGINT NULL
	)`,
		// The counts are BIGINT so their sums over every run cannot
		// overflow (SUM of an INT column is an INT).
		`IF OBJECT_ID(N'airgap_import_runs', N'U') IS NULL
	CREATE TABLE airgap_import_runs (
		run_id           VARCHAR(64) NOT NULL PRIMARY KEY,
		outcome          VARCHAR(16) NOT NULL,
		bundle_ids       NVARCHAR(MAX) NOT NULL,
		entries          BIGINT NOT NULL,
		imported         BIGINT NOT NULL,
		duplicates       BIGINT NOT NULL,
		skipped          BIGINT NOT NULL,
		duration_seconds FLOAT NOT NULL,
		imported_by      NVARCHAR(256) NOT NULL,
		run_at           DATETIME2 NOT NULL
	)`,
		`IF OBJECT_ID(N'airgap_import_conflicts', N'U') IS NULL
	CREATE TABLE airgap_import_conflicts (
		run_id        VARCHAR(64) NOT NULL,
		conflict_type VARCHAR(32) NOT NULL,
		conflicts     BIGINT NOT NULL,
		PRIMARY KEY (run_id, conflict_type)
	)`,
	},
	addedColumns: []addedColumn{
		{table: "notifications", name: "terminal_at", definition: "DATETIME2 NULL"},
		{table: "audit_log", name: "source_node", definition: "NVARCHAR(64) NULL"},
		// JSON of the events a row carries (AuditEvent.Carries); NULL on older rows.
		{table: "audit_log", name: "carried", definition: "NVARCHAR(MAX) NULL"},
		{table: "airgap_imports", name: "bytes", definition: "BIGINT NULL"},
	},
	hasColumn: `SELECT COUNT(*) FROM sys.columns WHERE object_id = OBJECT_ID(?) AND name = ?`,
	addColumn: `ALTER TABLE %s ADD %s %s`,
	upgrades: []string{
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'notifications_status_terminal')
	CREATE INDEX notifications_status_terminal ON notifications (status, terminal_at)`,
		backfillTerminalAt,
		// Keyset paging of every notification, newest first (ListNotifications).
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'notifications_created')
	CREATE INDEX notifications_created ON notifications (created_at, notification_id)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'notifications_status_created')
	CREATE INDEX notifications_status_created ON notifications (status, created_at, notification_id)`,
		// A node's events in time order (a node's whole story after a failover or an air-gap import).
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'audit_log_node_at')
	CREATE INDEX audit_log_node_at ON audit_log (source_node, at)`,
		// The KPIs and the parked lists read only the index at a year of rows
		// (outpost bench --only tables, on SQLite; the same indexes here).
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'notifications_status_site_created')
	CREATE INDEX notifications_status_site_created ON notifications (status, source_site_id, created_at)`,
		`IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'notifications_status' AND object_id = OBJECT_ID(N'notifications'))
	DROP INDEX notifications_status ON notifications`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'notifications_status_delivered')
	CREATE INDEX notifications_status_delivered ON notifications (status, delivered_at, source_site_id)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'site_calls_status_site_created')
	CREATE INDEX site_calls_status_site_created ON site_calls (status, source_site_id, kind, created_at)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'site_calls_status_created')
	CREATE INDEX site_calls_status_created ON site_calls (status, created_at, source_site_id)`,
		`IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'site_calls_status_updated' AND object_id = OBJECT_ID(N'site_calls'))
	DROP INDEX site_calls_status_updated ON site_calls`,
		// Keyset paging of every call and write, newest first (ListCalls).
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'site_calls_created')
	CREATE INDEX site_calls_created ON site_calls (created_at, operation_id)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'site_calls_site_created')
	CREATE INDEX site_calls_site_created ON site_calls (source_site_id, created_at, operation_id, status)`,
		`IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = 'site_calls_target_created')
	CREATE INDEX site_calls_target_created ON site_calls (target, created_at, operation_id, status)`,
	},
	// UPDLOCK+HOLDLOCK makes the check and the insert one atomic step; @p1
	// is the first placeholder, the notification id.
	insertIfMissing: `INSERT INTO notifications (` + notificationColumns + `)
	SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
	WHERE NOT EXISTS (SELECT 1 FROM notifications WITH (UPDLOCK, HOLDLOCK) WHERE notification_id = @p1)`,
	upsertSiteCalls: oneStatement(sqlServerUpsertSiteCalls),
	// SQL Server takes at most 2,100 parameters per request.
	siteCallChunk:     2099 / len(siteCallColumns),
	insertAuditEvents: sqlServerInsertAuditEvents,
	auditChunk:        2099 / len(auditColumns),
	deleteBatch:       sqlServerDeleteBatch,
	// HOLDLOCK keeps the key range locked from the match to the insert, so
	// two first reconciliations of one site cannot both insert.
	advanceCursor: `MERGE site_cursors WITH (HOLDLOCK) AS t
	USING (VALUES (?, ?, ?)) AS s (site_id, reconciled_seq, updated_at)
	ON t.site_id = s.site_id
	WHEN MATCHED AND s.reconciled_seq > t.reconciled_seq THEN
		UPDATE SET reconciled_seq = s.reconciled_seq, updated_at = s.updated_at
	WHEN NOT MATCHED THEN
		INSERT (site_id, reconciled_seq, updated_at) VALUES (s.site_id, s.reconciled_seq, s.updated_at);`,
}

// sqlServerUpsertSiteCalls merges the rows as a VALUES table. HOLDLOCK keeps
// concurrent batches with a new id from both inserting it; OUTPUT names
// each row inserted or updated, not a row matched but skipped for its seq.
// MERGE must end with a semicolon.
func sqlServerUpsertSiteCalls(rows int) string {
	src := make([]string, len(siteCallColumns))
	for i, c := range siteCallColumns {
		src[i] = "s." + c
	}
	return `MERGE site_calls WITH (HOLDLOCK) AS t
	USING (VALUES ` + valueRows(rows) + `) AS s (` + strings.Join(siteCallColumns, ", ") + `)
	ON t.operation_id = s.operation_id
	WHEN MATCHED AND s.seq > t.seq THEN
		UPDATE SET ` + siteCallAssignments("s") + `
	WHEN NOT MATCHED THEN
		INSERT (` + strings.Join(siteCallColumns, ", ") + `) VALUES (` + strings.Join(src, ", ") + `)
	OUTPUT inserted.operation_id, CASE $action WHEN 'INSERT' THEN 1 ELSE 0 END;`
}

// sqlServerInsertAuditEvents inserts the events whose id is not stored;
// HOLDLOCK keeps two concurrent writers of one new id from both inserting it.
// The source rows must have distinct ids.
func sqlServerInsertAuditEvents(rows int) string {
	src := make([]string, len(auditColumns))
	for i, c := range auditColumns {
		src[i] = "s." + c
	}
	return `MERGE audit_log WITH (HOLDLOCK) AS t
	USING (VALUES ` + placeholderRows(rows, len(auditColumns)) + `) AS s (` + strings.Join(auditColumns, ", ") + `)
	ON t.event_id = s.event_id
	WHEN NOT MATCHED THEN
		INSERT (` + strings.Join(auditColumns, ", ") + `) VALUES (` + strings.Join(src, ", ") + `)
	OUTPUT inserted.event_id;`
}

// sqlServerDeleteBatch deletes at most limit rows of table matching where;
// its arguments are where's cutoff (@p1), then the limit (@p2).
func sqlServerDeleteBatch(table, _, where string) string {
	return `DELETE TOP (@p2) FROM ` + table + ` WHERE ` + where
}

// OpenSQLServer opens the central store on SQL Server and creates its tables.
func OpenSQLServer(ctx context.Context, dsn string) (*Store, error) {
	db, err := sql.Open("sqlserver", dsn)
	if err != nil {
		return nil, fmt.Errorf("open central store on sql server: %w", err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to sql server: %w", err)
	}
	s := &Store{db: db, reads: db, lookups: db, purges: db, dialect: sqlServerDialect}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}
