package centralstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/centralstore/storetest"
	"github.com/outpost-dev/outpost/internal/pgserver"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

func TestSQLite(t *testing.T) {
	store, err := centralstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "central.db"))
	require.NoError(t, err)
	defer store.Close()
	storetest.Exercise(t, store)
}

// The suite runs against a real PostgreSQL (Debian's package, started in
// the test's temp folder), on a database of its own.
func TestPostgres(t *testing.T) {
	store := centralstore.OpenPostgresForTest(t)
	storetest.Exercise(t, store)
}

// Central workers starting together on one new database each create the
// schema: none fails on a table or index another is creating.
func TestPostgresSchemaCreatedByWorkersStartingTogether(t *testing.T) {
	srv := pgserver.StartForTest(t)
	ctx := context.Background()
	require.NoError(t, srv.CreateDatabase(ctx, "central"))
	var opened errgroup.Group
	for range 4 {
		opened.Go(func() error {
			store, err := centralstore.OpenPostgres(ctx, srv.DSN("central"))
			if err != nil {
				return err
			}
			return store.Close()
		})
	}
	require.NoError(t, opened.Wait())
}

// SQL Server cannot run on the project's machines; this runs the same suite
// against a real server when OUTPOST_MSSQL_DSN is set.
func TestSQLServer(t *testing.T) {
	dsn := os.Getenv("OUTPOST_MSSQL_DSN")
	if dsn == "" {
		t.Skip("SQL Server cannot run on these machines: set OUTPOST_MSSQL_DSN=sqlserver://user:pass@host:1433?database=outpost_test to run the central store suite against SQL Server")
	}
	store, err := centralstore.OpenSQLServer(context.Background(), dsn)
	require.NoError(t, err)
	defer store.Close()
	storetest.Exercise(t, store)
}

// A central file from before terminal_at and audit_log opens: the columns
// (terminal_at, audit_log.source_node) and the table are added, terminal rows get a terminal time (delivery, else last
// attempt), and opening it again changes nothing.
func TestSQLiteUpgradesOlderSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "central.db")
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE notifications (
		notification_id TEXT PRIMARY KEY, type TEXT NOT NULL, list_name TEXT NOT NULL, subject TEXT NOT NULL,
		body TEXT NOT NULL, type_data TEXT NOT NULL DEFAULT '', status TEXT NOT NULL,
		retry_count INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
		resolved_targets TEXT NOT NULL DEFAULT 'null', source_site_id TEXT NOT NULL,
		source_instance_id TEXT NOT NULL DEFAULT '', source_script TEXT NOT NULL DEFAULT '',
		source_node TEXT NOT NULL DEFAULT '', site_enqueued_at DATETIME NOT NULL, created_at DATETIME NOT NULL,
		last_attempt_at DATETIME, next_attempt_at DATETIME, delivered_at DATETIME)`)
	require.NoError(t, err)
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	delivered, attempted := created.Add(time.Hour), created.Add(2*time.Hour)
	insert := `INSERT INTO notifications (notification_id, type, list_name, subject, body, status, source_site_id,
		site_enqueued_at, created_at, last_attempt_at, delivered_at) VALUES (?, 'Email', 'ops', 's', 'b', ?, 'plant-1', ?, ?, ?, ?)`
	_, err = db.Exec(insert, "delivered", "Delivered", created, created, delivered, delivered)
	require.NoError(t, err)
	_, err = db.Exec(insert, "discarded", "Discarded", created, created, attempted, nil)
	require.NoError(t, err)
	_, err = db.Exec(insert, "parked", "Parked", created, created, attempted, nil)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	for range 2 {
		store, err := centralstore.OpenSQLite(ctx, path)
		require.NoError(t, err)
		for id, want := range map[string]*time.Time{"delivered": &delivered, "discarded": &attempted, "parked": nil} {
			got, err := store.GetNotification(ctx, id)
			require.NoError(t, err)
			if want == nil {
				require.Nil(t, got.TerminalAt, id)
				continue
			}
			require.NotNil(t, got.TerminalAt, id)
			require.True(t, want.Equal(*got.TerminalAt), "%s: want %s, got %s", id, *want, *got.TerminalAt)
		}
		n, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{{
			EventID: "notification/parked/enqueued", OperationID: "parked", Kind: contract.KindNotification,
			SourceNode: "node-a", Event: centralstore.AuditEnqueued, At: created,
		}})
		require.NoError(t, err)
		require.LessOrEqual(t, n, 1)
		events, err := store.ListAuditEvents(ctx, "parked")
		require.NoError(t, err)
		require.Len(t, events, 1)
		require.Equal(t, "node-a", events[0].SourceNode, "audit_log got its source_node column")
		require.NoError(t, store.Close())
	}
}

// A central file from before the audit trails were read by event id loses
// its index by operation id on open (every event wrote it) and gains the
// definitions' own; the events stored before still make their trails. Its
// index by time alone gives way to the one by time and node.
func TestSQLiteUpgradeDropsTheAuditOperationIndex(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "central.db")
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	for _, stmt := range []string{
		`CREATE TABLE audit_log (event_id TEXT PRIMARY KEY, operation_id TEXT NOT NULL, kind TEXT NOT NULL,
			site_id TEXT NOT NULL DEFAULT '', event TEXT NOT NULL, status TEXT NOT NULL DEFAULT '',
			detail TEXT NOT NULL DEFAULT '', operator TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
			at DATETIME NOT NULL)`,
		`CREATE INDEX audit_log_operation ON audit_log (operation_id, at)`,
		`CREATE INDEX audit_log_at ON audit_log (at)`,
		`INSERT INTO audit_log (event_id, operation_id, kind, event, at) VALUES
			('call/op-1/enqueued', 'op-1', 'ExternalCall', 'Enqueued', '2025-01-01 00:00:00+00:00'),
			('5d0c2a34-0f6e-4f7e-9d7e-2b1f1c9a7e11', 'list/ops', 'List', 'Changed', '2025-01-01 00:00:00+00:00')`,
	} {
		_, err = db.Exec(stmt)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	store, err := centralstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	for op, id := range map[string]string{"op-1": "call/op-1/enqueued", "list/ops": "5d0c2a34-0f6e-4f7e-9d7e-2b1f1c9a7e11"} {
		events, err := store.ListAuditEvents(ctx, op)
		require.NoError(t, err)
		require.Len(t, events, 1, op)
		require.Equal(t, id, events[0].EventID)
	}
	require.NoError(t, store.Close())

	db, err = sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	defer db.Close()
	var indexes []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_log' AND sql IS NOT NULL ORDER BY name`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		indexes = append(indexes, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"audit_log_at_node", "audit_log_definitions"}, indexes)
}

// A bundle imported before airgap_imports had its bytes column reads back
// with size 0 and counts as a bundle, but not as a size: its size is unknown.
func TestSQLiteAddsBundleSizesToOlderAirgapImports(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "central.db")
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE airgap_imports (bundle_id TEXT PRIMARY KEY, site_id TEXT NOT NULL, nodes TEXT NOT NULL,
		entries INTEGER NOT NULL, imported INTEGER NOT NULL, duplicates INTEGER NOT NULL, skipped INTEGER NOT NULL,
		chain_heads TEXT NOT NULL, imported_by TEXT NOT NULL, imported_at DATETIME NOT NULL)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO airgap_imports VALUES ('b-old', 'ship-7', 'node-a', 3, 3, 0, 0, 'node-a=q83v', 'ana', ?)`,
		time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	store, err := centralstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	defer store.Close()
	imp, err := store.GetAirgapImport(ctx, "b-old")
	require.NoError(t, err)
	require.Zero(t, imp.Bytes)
	st, err := store.AirgapImportStats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Bundles)
	require.Zero(t, st.BundleBytes.Count, "an unknown size is no sample")
}

// A central SQLite file removed under the worker fails Ping (and so
// /readyz) instead of looking healthy while its writes go nowhere.
func TestSQLitePingNoticesTheFileGone(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "central.db")
	s, err := centralstore.OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.Ping(context.Background()))
	require.NoError(t, os.Remove(path))
	require.ErrorIs(t, s.Ping(context.Background()), sqlitedb.ErrReplaced)
}
