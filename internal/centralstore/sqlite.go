package centralstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

// sqliteChunkRows is the most rows one statement of a batch write (site
// calls, audit events) carries on SQLite: far fewer than its 32,766
// variables would allow. What a statement takes grows with its rows, its
// arguments while it runs and its compiled program while it stays
// prepared on a write connection (keptStatements keeps the full chunks').
// With 500 rows, two workers ingesting a fleet's telemetry peaked at
// 95-101 MiB VmHWM each in six runs; with 100, 85-89 MiB in four, the
// ingest keeping its rate (outpost bench --only fleet; --only telemetry
// 1.09-1.10x either way).
const sqliteChunkRows = 100

var sqliteDialect = dialect{
	name:       "sqlite",
	readOnlyTx: true,
	rowLimit:   " LIMIT ?",
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
		delivered_at       DATETIME,
		terminal_at        DATETIME
	)`,
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
		`CREATE INDEX IF NOT EXISTS site_calls_status_terminal ON site_calls (status, terminal_at)`,
		`CREATE TABLE IF NOT EXISTS site_cursors (
		site_id        TEXT PRIMARY KEY,
		reconciled_seq INTEGER NOT NULL,
		updated_at     DATETIME NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS audit_log (
		event_id     TEXT PRIMARY KEY,
		operation_id TEXT NOT NULL,
		kind         TEXT NOT NULL,
		site_id      TEXT NOT NULL DEFAULT '',
		event        TEXT NOT NULL,
		status       TEXT NOT NULL DEFAULT '',
		detail       TEXT NOT NULL DEFAULT '',
		operator     TEXT NOT NULL DEFAULT '',
		reason       TEXT NOT NULL DEFAULT '',
		at           DATETIME NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS notification_lists (
		name        TEXT PRIMARY KEY,
		type        TEXT NOT NULL,
		targets     TEXT NOT NULL,
		channel     TEXT NOT NULL DEFAULT '',
		type_data   TEXT NOT NULL DEFAULT '{}',
		description TEXT NOT NULL DEFAULT '',
		updated_by  TEXT NOT NULL DEFAULT '',
		updated_at  DATETIME NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS delivery_channels (
		name        TEXT PRIMARY KEY,
		type        TEXT NOT NULL,
		settings    TEXT NOT NULL DEFAULT '{}',
		description TEXT NOT NULL DEFAULT '',
		updated_by  TEXT NOT NULL DEFAULT '',
		updated_at  DATETIME NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS airgap_imports (
		bundle_id   TEXT PRIMARY KEY,
		site_id     TEXT NOT NULL,
		nodes       TEXT NOT NULL,
		entries     INTEGER NOT NULL,
		imported    INTEGER NOT NULL,
		duplicates  INTEGER NOT NULL,
		skipped     INTEGER NOT NULL,
		chain_heads TEXT NOT NULL,
		imported_by TEXT NOT NULL,
		imported_at DATETIME NOT NULL,
		bytes       INTEGER
	)`,
		`CREATE TABLE IF NOT EXISTS airgap_import_runs (
		run_id           TEXT PRIMARY KEY,
		outcome          TEXT NOT NULL,
		bundle_ids       TEXT NOT NULL,
		entries          INTEGER NOT NULL,
		imported         INTEGER NOT NULL,
		duplicates       INTEGER NOT NULL,
		skipped          INTEGER NOT NULL,
		duration_seconds REAL NOT NULL,
		imported_by      TEXT NOT NULL,
		run_at           DATETIME NOT NULL
	)`,
		`CREATE TABLE IF NOT EXISTS airgap_import_conflicts (
		run_id        TEXT NOT NULL,
		conflict_type TEXT NOT NULL,
		conflicts     INTEGER NOT NULL,
		PRIMARY KEY (run_id, conflict_type)
	)`,
	},
	addedColumns: []addedColumn{
		{table: "notifications", name: "terminal_at", definition: "DATETIME"},
		{table: "audit_log", name: "source_node", definition: "TEXT"},
		// JSON of the events a row carries (AuditEvent.Carries); NULL on older rows.
		{table: "audit_log", name: "carried", definition: "TEXT"},
		{table: "airgap_imports", name: "bytes", definition: "INTEGER"},
	},
	hasColumn: `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`,
	addColumn: `ALTER TABLE %s ADD COLUMN %s %s`,
	upgrades: []string{
		`CREATE INDEX IF NOT EXISTS notifications_status_terminal ON notifications (status, terminal_at)`,
		backfillTerminalAt,
		// Keyset paging of every notification, newest first (ListNotifications).
		`CREATE INDEX IF NOT EXISTS notifications_created ON notifications (created_at, notification_id)`,
		`CREATE INDEX IF NOT EXISTS notifications_status_created ON notifications (status, created_at, notification_id)`,
		// The KPIs and the parked lists read only the index at a year of rows
		// (outpost bench --only tables); the indexes they replace served no
		// query these do not serve.
		`CREATE INDEX IF NOT EXISTS notifications_status_site_created ON notifications (status, source_site_id, created_at)`,
		`DROP INDEX IF EXISTS notifications_status`,
		`CREATE INDEX IF NOT EXISTS notifications_status_delivered ON notifications (status, delivered_at, source_site_id)`,
		`CREATE INDEX IF NOT EXISTS site_calls_status_site_created ON site_calls (status, source_site_id, kind, created_at)`,
		`CREATE INDEX IF NOT EXISTS site_calls_status_created ON site_calls (status, created_at, source_site_id)`,
		`DROP INDEX IF EXISTS site_calls_status_updated`,
		// Keyset paging of every call and write, newest first (ListCalls):
		// each filter but the kind leads an index that goes on in the
		// list's order (the status one is site_calls_status_created). The
		// status at their end is checked in the index, not the table: the
		// parked calls of one site walk the site's index entries, and
		// without it read a row per entry (outpost bench --only tables,
		// 10,000,000 rows: parked list of one site p99 207 ms, up from 11).
		`CREATE INDEX IF NOT EXISTS site_calls_created ON site_calls (created_at, operation_id)`,
		`CREATE INDEX IF NOT EXISTS site_calls_site_created ON site_calls (source_site_id, created_at, operation_id, status)`,
		`CREATE INDEX IF NOT EXISTS site_calls_target_created ON site_calls (target, created_at, operation_id, status)`,
		// An operation's events are found by their ids (listAuditEventsSQL),
		// and the index by operation id, as scattered as the key, doubled
		// the cost of storing events (outpost bench --only fleet). Only the
		// definitions' events, whose ids are random, keep one.
		`CREATE INDEX IF NOT EXISTS audit_log_definitions ON audit_log (operation_id, at) WHERE kind IN ('List', 'Channel')`,
		`DROP INDEX IF EXISTS audit_log_operation`,
		// One index by time serves the purge and a node's events over a
		// window of time (its story after a failover or an air-gap import):
		// node names are roles (node-a, node-b) that every site shares, so
		// an index led by the node narrowed that question no better. Each
		// index of audit_log is written for every event, and the events'
		// times from a fleet interleave: two time indexes cost 14% of the
		// store's time for telemetry with its events (100,000 audited
		// changes, 8 batches at a time: 7.0 s with this one, 8.1 s with
		// (at) and (source_node, at)). SQL Server keeps both, unmeasured.
		`CREATE INDEX IF NOT EXISTS audit_log_at_node ON audit_log (at, source_node)`,
		`DROP INDEX IF EXISTS audit_log_node_at`,
		`DROP INDEX IF EXISTS audit_log_at`,
	},
	insertIfMissing:   insertNotificationOnConflict,
	exactTimes:        true,
	upsertSiteCalls:   sqliteUpsertSiteCalls,
	siteCallChunk:     sqliteChunkRows,
	insertAuditEvents: orFail(insertAuditEventsOnConflict),
	auditChunk:        sqliteChunkRows,
	deleteBatch:       deleteBatchByRowid,
	advanceCursor:     advanceCursorOnConflict,
}

// sqliteUpsertSiteCalls is SQLite's upsert of site_calls rows in two
// statements that need no statement journal (orFail): the rows whose id is
// new go in, then the stored rows the batch has a higher seq for are
// updated from the same values. upsertSiteCallsOnConflict's DO UPDATE
// would check its columns with ABORT whatever the statement says.
func sqliteUpsertSiteCalls(rows int) []string {
	values := valueRows(rows)
	return []string{
		`INSERT OR FAIL INTO site_calls (` + strings.Join(siteCallColumns, ", ") + `)
		VALUES ` + values + `
		ON CONFLICT (operation_id) DO NOTHING
		RETURNING operation_id, 1`,
		`WITH batch (` + strings.Join(siteCallColumns, ", ") + `) AS (VALUES ` + values + `)
		UPDATE OR FAIL site_calls SET ` + siteCallAssignments("batch") + `
		FROM batch WHERE site_calls.operation_id = batch.operation_id AND batch.seq > site_calls.seq
		RETURNING operation_id, 0`,
	}
}

// orFail is insert with SQLite's OR FAIL: a constraint it breaks fails the
// statement and keeps the rows it already wrote, where the default (ABORT)
// undoes them. To undo a statement SQLite copies every page it changes
// into a statement journal first, a temporary file once past 64 KiB: with
// the upsert's, 22% of the writer's CPU for audited telemetry (go test
// ./internal/bench -bench AuditedTelemetryWrite). Every statement given
// here runs in a transaction that its error rolls back whole (dbtx.Run),
// so a failed statement's rows are never committed either way.
func orFail(insert func(rows int) string) func(rows int) string {
	return func(rows int) string {
		return strings.Replace(insert(rows), "INSERT INTO", "INSERT OR FAIL INTO", 1)
	}
}

// oneStatement is upsert as the only statement of a dialect's upsertSiteCalls.
func oneStatement(upsert func(rows int) string) func(rows int) []string {
	return func(rows int) []string { return []string{upsert(rows)} }
}

// The statements below are SQLite's and PostgreSQL's alike: both take
// INSERT … ON CONFLICT with the same meaning.

// insertNotificationOnConflict inserts a notification unless its id exists.
const insertNotificationOnConflict = `INSERT INTO notifications (` + notificationColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (notification_id) DO NOTHING`

// advanceCursorOnConflict sets a site's reconciled_seq unless the stored
// one is as high.
const advanceCursorOnConflict = `INSERT INTO site_cursors (site_id, reconciled_seq, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (site_id) DO UPDATE SET reconciled_seq = excluded.reconciled_seq, updated_at = excluded.updated_at
		WHERE excluded.reconciled_seq > site_cursors.reconciled_seq`

// upsertSiteCallsOnConflict skips the update for a row whose seq is not
// higher, and the database then counts it as unchanged. PostgreSQL's
// upsert (SQLite's needs no statement journal: sqliteUpsertSiteCalls).
func upsertSiteCallsOnConflict(rows int) string {
	return `INSERT INTO site_calls (` + strings.Join(siteCallColumns, ", ") + `)
		VALUES ` + valueRows(rows) + `
		ON CONFLICT (operation_id) DO UPDATE SET ` + siteCallAssignments("excluded") + `
		WHERE excluded.seq > site_calls.seq`
}

// insertAuditEventsOnConflict skips an event whose id is stored and
// returns the ids of the rows inserted.
func insertAuditEventsOnConflict(rows int) string {
	return `INSERT INTO audit_log (` + strings.Join(auditColumns, ", ") + `)
		VALUES ` + placeholderRows(rows, len(auditColumns)) + `
		ON CONFLICT (event_id) DO NOTHING
		RETURNING event_id`
}

// deleteBatchBySubquery deletes at most limit rows of table matching where;
// its arguments are where's cutoff, then the limit. SQLite's DELETE takes
// no LIMIT unless compiled to, and PostgreSQL's none, so the keys come from
// a subquery.
func deleteBatchBySubquery(table, key, where string) string {
	return `DELETE FROM ` + table + ` WHERE ` + key + ` IN (SELECT ` + key + ` FROM ` + table + ` WHERE ` + where + ` LIMIT ?)`
}

// deleteBatchByRowid is deleteBatchBySubquery for SQLite, where every
// table (but those declared WITHOUT ROWID, which the purge does not touch)
// has a rowid: the subquery's index carries it, so each row is deleted
// without first looking its key up in the primary key's index.
func deleteBatchByRowid(table, _, where string) string {
	return deleteBatchBySubquery(table, "rowid", where)
}

// writeCache is the page cache of each connection of the writes' pool:
// 8 MiB instead of SQLite's default 2 MiB. The writes do not map the file
// either (memoryMap is for the readers and the purge): a worker's page
// cache and the pages of the file it mapped both count in its memory.
// Two workers ingesting a fleet's telemetry into one file peaked at
// 177-231 MiB VmHWM each with 64 MiB and the map; with the telemetry
// budget and 8 MiB, the mapped pages alone were 60-85 MiB of 167-193
// MiB, and without the map the peaks fell to 118-135 MiB (outpost bench
// --only fleet), the ingest keeping its rate.
const writeCache = "cache_size(-8192)"

// purgeCache gives the purge's one connection 64 MiB of SQLite pages.
// Central's tables hold a year of rows: the purge deletes from every index
// of a table, and with 2 MiB each batch reads the same upper index pages
// from the OS again (outpost bench --only tables: the purge about twice as
// fast). The connection is closed once the purge has been idle for
// purgeIdle, which frees its cache until the next day's purge.
const purgeCache = "cache_size(-65536)"

// purgeIdle is how long the purge's connection, and its cache, outlive
// its last batch.
const purgeIdle = time.Minute

// memoryMap maps up to 1 GiB of the file for the readers and the purge:
// a page read from the map costs no system call and no copy. In WAL mode
// every commit of another connection (the purge's, 1,000 rows a
// transaction) empties a reader's page cache, and the KPIs then read their
// index pages again: from the map, not through read(2).
const memoryMap = "mmap_size(1073741824)"

// OpenSQLite opens (creating if needed) the central store in a SQLite file.
func OpenSQLite(ctx context.Context, path string) (*Store, error) {
	db, err := sqlitedb.Open(ctx, path, writeCache)
	if err != nil {
		return nil, fmt.Errorf("central store: %w", err)
	}
	guard, err := sqlitedb.NewGuard(path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("central store: %w", err)
	}
	s := &Store{db: db, dialect: sqliteDialect, guard: guard, turn: make(chan struct{}, 1)}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.openSQLitePools(ctx, path); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// openSQLitePools opens the store's pools beside its writer's (readers,
// lookups, the purge's), or none of them.
func (s *Store) openSQLitePools(ctx context.Context, path string) error {
	var err error
	if s.reads, err = openSQLiteReads(ctx, path); err != nil {
		return err
	}
	if s.lookups, err = openSQLiteLookups(ctx, path); err != nil {
		s.reads.Close()
		return err
	}
	if s.purges, err = openSQLitePurges(ctx, path); err != nil {
		s.reads.Close()
		s.lookups.Close()
		return err
	}
	return nil
}

// openSQLitePurges opens the purge's pool of the central store at path: one
// connection with a big page cache (purgeCache), closed when idle.
func openSQLitePurges(ctx context.Context, path string) (*sql.DB, error) {
	purges, err := sqlitedb.Open(ctx, path, purgeCache, memoryMap)
	if err != nil {
		return nil, fmt.Errorf("central store: purge connection: %w", err)
	}
	purges.SetMaxOpenConns(1)
	purges.SetConnMaxIdleTime(purgeIdle)
	return purges, nil
}

// openSQLiteReads opens the readers' pool of the central store at path:
// query-only connections with SQLite's default page cache (about 2 MiB).
// In WAL mode a reader empties its page cache whenever another connection
// committed since its last read, and the purge commits every 1,000 rows.
// Emptying a 64 MiB cache frees its pages one by one, each free a system
// call in the allocator, under a lock every connection of the process
// shares: a goroutine dump caught a KPI read and the purge both stalled
// for 250 to 530 ms on one reset (outpost bench --only tables). A reader
// gains little from a big cache anyway: the next commit empties it.
func openSQLiteReads(ctx context.Context, path string) (*sql.DB, error) {
	reads, err := sqlitedb.Open(ctx, path, memoryMap, "query_only(1)")
	if err != nil {
		return nil, fmt.Errorf("central store: readers: %w", err)
	}
	return reads, nil
}

// openSQLiteLookups opens the lookups' pool of the central store at path:
// query-only connections like the readers', without the memory map. A
// read that finds the file changed since its connection's last read (on a
// worker delivering notifications, nearly every one: each commits its
// row) drops the whole map, and maps and faults in again whatever it
// reads: a lookup of two or three pages costs more through a fresh map
// than through read(2). Reading a list right after a commit: 124-136 µs
// with the map, 67-73 µs without (go test ./internal/centralstore -bench
// LookupAfterCommit).
func openSQLiteLookups(ctx context.Context, path string) (*sql.DB, error) {
	lookups, err := sqlitedb.Open(ctx, path, "query_only(1)")
	if err != nil {
		return nil, fmt.Errorf("central store: lookups: %w", err)
	}
	return lookups, nil
}
