package pgserver_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/pgserver"
)

func TestStartCreateDatabaseQuery(t *testing.T) {
	t.Parallel()
	srv := pgserver.StartForTest(t)
	db := openDatabase(t, srv, "outpost_test")

	var got string
	require.NoError(t, db.QueryRow("SELECT current_database() || ' as ' || current_user").Scan(&got))
	require.Equal(t, "outpost_test as outpost", got)
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	srv := pgserver.StartForTest(t)
	ctx := context.Background()
	db := openDatabase(t, srv, "kept")
	_, err := db.Exec("CREATE TABLE t (v text); INSERT INTO t VALUES ('before the stop')")
	require.NoError(t, err)

	require.NoError(t, srv.Stop())
	require.Error(t, db.PingContext(ctx), "the server still answers after Stop")
	require.NoError(t, srv.Restart(ctx))

	var v string
	require.NoError(t, db.QueryRow("SELECT v FROM t").Scan(&v))
	require.Equal(t, "before the stop", v)
}

func TestRestartRefusesARunningServer(t *testing.T) {
	t.Parallel()
	srv := pgserver.StartForTest(t)
	require.ErrorContains(t, srv.Restart(context.Background()), "Stop it first")
}

// Two servers in one process keep to their own port, data and password.
func TestTwoServersSideBySide(t *testing.T) {
	t.Parallel()
	a, b := pgserver.StartForTest(t), pgserver.StartForTest(t)
	require.NotEqual(t, a.Port, b.Port)
	require.NotEqual(t, a.DataDir, b.DataDir)
	require.NotEqual(t, a.Password, b.Password)

	dbA, dbB := openDatabase(t, a, "same_name"), openDatabase(t, b, "same_name")
	_, err := dbA.Exec("CREATE TABLE only_in_a (v int)")
	require.NoError(t, err)
	var n int
	require.NoError(t, dbB.QueryRow("SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n))
	require.Zero(t, n, "a table created on one server shows on the other")
}

// A failing initdb is reported with its command line and its own words.
func TestStartReportsInitdbFailure(t *testing.T) {
	t.Parallel()
	if _, err := pgserver.BinDir(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	leftover := filepath.Join(dir, "postgresql", "data")
	require.NoError(t, os.MkdirAll(leftover, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(leftover, "PG_VERSION"), []byte("15\n"), 0o644))

	_, err := pgserver.Start(context.Background(), pgserver.Options{Dir: dir})
	require.ErrorContains(t, err, "initdb --pgdata "+leftover)
	require.ErrorContains(t, err, "exists but is not empty")
}

func openDatabase(t *testing.T, srv *pgserver.Server, name string) *sql.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, srv.CreateDatabase(ctx, name))
	db, err := sql.Open("pgx", srv.DSN(name))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}
