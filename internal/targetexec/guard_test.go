package targetexec

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/outpost-dev/outpost/internal/targets"
)

// What a page or script sent to POST /v1/writes to escape the one write it
// may make: each is refused before it runs, and the database is unchanged.
func TestSQLiteWriteRefusesEscapes(t *testing.T) {
	t.Parallel()
	path, db := newTargetDB(t)
	r := sqliteExecutor(t, path, 5*time.Second)
	attached := filepath.Join(t.TempDir(), "planted.db")
	for name, req := range map[string]targets.Request{
		"stacked drop": write("historian", `INSERT INTO readings (tag) VALUES (?); DROP TABLE readings`, "x"),
		"attach":       write("historian", `ATTACH DATABASE ? AS x`, attached),
		"pragma":       write("historian", `PRAGMA query_only=1`),
		"ddl":          write("historian", `DROP TABLE readings`),
		"missing arg":  write("historian", `INSERT INTO readings (tag, value) VALUES (?, ?)`, "x"),
		"surplus arg":  write("historian", `INSERT INTO readings (tag) VALUES (?)`, "x", 1),
	} {
		_, err := r.Execute(t.Context(), req)
		var invalid *targets.InvalidError
		require.ErrorAs(t, err, &invalid, name)
	}
	_, err := os.Stat(attached)
	require.ErrorIs(t, err, os.ErrNotExist, "ATTACH created no file")
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM readings`).Scan(&n), "the table is still there")
	require.Zero(t, n)
	res, err := r.Execute(t.Context(), write("historian", `INSERT INTO readings (tag) VALUES (?)`, "after"))
	require.NoError(t, err, "later writes still work")
	require.Equal(t, int64(1), res.RowsAffected)
}

// Where the definition allows PRAGMA and ATTACH, their effect ends with the
// request: the next write runs on a fresh connection.
func TestSQLiteConnectionStateDoesNotOutliveTheRequest(t *testing.T) {
	t.Parallel()
	path, db := newTargetDB(t)
	r := newExecutor(nil, map[string]targets.Database{"historian": {DSN: path, Timeout: 5 * time.Second,
		Allow: []string{targets.AllowPragma, targets.AllowAttach}}})
	t.Cleanup(func() { require.NoError(t, r.Close()) })

	_, err := r.Execute(t.Context(), write("historian", `PRAGMA query_only=1`))
	require.NoError(t, err)
	res, err := r.Execute(t.Context(), write("historian", `INSERT INTO readings (tag) VALUES (?)`, "after pragma"))
	require.NoError(t, err, "query_only did not outlive its request")
	require.Equal(t, int64(1), res.RowsAffected)

	_, err = r.Execute(t.Context(), write("historian", `ATTACH DATABASE ? AS other`, filepath.Join(t.TempDir(), "other.db")))
	require.NoError(t, err)
	_, err = r.Execute(t.Context(), write("historian", `CREATE TABLE other.t (a)`))
	var invalid *targets.InvalidError
	require.ErrorAs(t, err, &invalid, "DDL is still refused")
	_, err = r.Execute(t.Context(), write("historian", `INSERT INTO other.t (a) VALUES (1)`))
	f := requireFailure(t, err, true)
	require.Contains(t, f.Message, "no such table: other.t", "the attachment did not outlive its request")

	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM readings`).Scan(&n))
	require.Equal(t, 1, n)
}

// SQLite itself refuses what the lexer refuses, should the two ever read a
// statement differently: the authorizer on the guarded driver's
// connections.
func TestSQLiteAuthorizerBacksTheLexer(t *testing.T) {
	t.Parallel()
	path, db := newTargetDB(t)
	pool := sql.OpenDB(sqliteConnector{dsn: sqliteDSN(path, time.Second), driver: guardedSQLiteDriver(nil)})
	t.Cleanup(func() { require.NoError(t, pool.Close()) })
	conn, err := pool.Conn(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, conn.Close()) })

	for _, stmt := range []string{`DROP TABLE readings`, `PRAGMA query_only=1`, `ATTACH DATABASE ':memory:' AS x`, `CREATE TABLE t (a)`} {
		_, err := execTx(t.Context(), conn, stmt, nil)
		var se *sqlite.Error
		require.ErrorAs(t, err, &se, stmt)
		require.Equal(t, sqlite3.SQLITE_AUTH, se.Code(), stmt)
	}
	n, err := execTx(t.Context(), conn, `INSERT INTO readings (tag) VALUES (?)`, []any{"ok"})
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	var count int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM readings`).Scan(&count))
	require.Equal(t, 1, count)
}

// A request its definitions refuse is an *InvalidError, and no attempt.
func TestExecuteInvalid(t *testing.T) {
	t.Parallel()
	r := newExecutor(map[string]targets.ExternalSystem{"erp": {BaseURL: "http://erp.invalid/api",
		Methods: map[string]targets.Method{"getOrder": {Verb: "GET", Path: "/orders/{id}"}}}}, nil)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	_, err := r.Execute(t.Context(), call("crm", "getOrder", nil))
	var inv *targets.InvalidError
	require.ErrorAs(t, err, &inv)
	require.Equal(t, "system", inv.Field)
}
