package targetexec

import (
	"context"
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

// newTargetDB creates a SQLite file with table readings(id PRIMARY KEY,
// tag UNIQUE, value) and returns its path and a separate handle on it.
func newTargetDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "historian.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	_, err = db.Exec(`CREATE TABLE readings (id INTEGER PRIMARY KEY, tag TEXT NOT NULL UNIQUE, value REAL)`)
	require.NoError(t, err)
	return path, db
}

func sqliteExecutor(t *testing.T, path string, timeout time.Duration) *Executor {
	t.Helper()
	r := newExecutor(nil, map[string]targets.Database{"historian": {Driver: targets.DriverSQLite, DSN: path, Timeout: timeout}})
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	return r
}

func requireFailure(t *testing.T, err error, permanent bool) *targets.Failure {
	t.Helper()
	var f *targets.Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, permanent, f.Permanent, f.Message)
	require.Zero(t, f.Code)
	return f
}

func TestSQLiteWrite(t *testing.T) {
	t.Parallel()
	path, db := newTargetDB(t)
	r := sqliteExecutor(t, path, 5*time.Second)
	// The quote in the tag would break SQL built by formatting; bound, it is data.
	res, err := r.Execute(t.Context(), write("historian", `INSERT INTO readings (tag, value) VALUES (?, ?)`, "O'Brien; DROP TABLE readings", 21.5))
	require.NoError(t, err)
	require.Equal(t, int64(1), res.RowsAffected)

	var tag string
	var value float64
	require.NoError(t, db.QueryRow(`SELECT tag, value FROM readings`).Scan(&tag, &value))
	require.Equal(t, "O'Brien; DROP TABLE readings", tag)
	require.Equal(t, 21.5, value)

	res, err = r.Execute(t.Context(), write("historian", `UPDATE readings SET value = value + ?`, 1))
	require.NoError(t, err)
	require.Equal(t, int64(1), res.RowsAffected)
}

func TestSQLiteMissingFileIsTransientAndNotCreated(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "not-there.db")
	r := sqliteExecutor(t, path, 2*time.Second)
	_, err := r.Execute(t.Context(), write("historian", `INSERT INTO readings (tag) VALUES (?)`, "a"))
	f := requireFailure(t, err, false)
	var se *sqlite.Error
	require.ErrorAs(t, f, &se)
	require.Equal(t, sqlite3.SQLITE_CANTOPEN, se.Code()&0xff)
	_, statErr := os.Stat(path)
	require.ErrorIs(t, statErr, os.ErrNotExist)
}

func TestSQLiteLockedIsTransientThenSucceeds(t *testing.T) {
	t.Parallel()
	path, db := newTargetDB(t)
	r := sqliteExecutor(t, path, 400*time.Millisecond)
	holder, err := db.Conn(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, holder.Close()) })
	_, err = holder.ExecContext(t.Context(), `BEGIN EXCLUSIVE`)
	require.NoError(t, err)

	req := write("historian", `INSERT INTO readings (tag, value) VALUES (?, ?)`, "t1", 1)
	_, err = r.Execute(t.Context(), req)
	f := requireFailure(t, err, false)
	var se *sqlite.Error
	require.ErrorAs(t, f, &se)
	require.Equal(t, sqlite3.SQLITE_BUSY, se.Code()&0xff)

	_, err = holder.ExecContext(context.Background(), `COMMIT`)
	require.NoError(t, err)
	res, err := r.Execute(t.Context(), req)
	require.NoError(t, err)
	require.Equal(t, int64(1), res.RowsAffected)
}

func TestSQLitePermanentErrors(t *testing.T) {
	t.Parallel()
	path, db := newTargetDB(t)
	_, err := db.Exec(`INSERT INTO readings (tag) VALUES ('dup')`)
	require.NoError(t, err)
	r := sqliteExecutor(t, path, 5*time.Second)
	for name, req := range map[string]targets.Request{
		"syntax":        write("historian", `INSERT INTO readings (tag) VALUS (?)`, "x"),
		"unique":        write("historian", `INSERT INTO readings (tag) VALUES (?)`, "dup"),
		"not null":      write("historian", `INSERT INTO readings (value) VALUES (?)`, 1),
		"unknown table": write("historian", `INSERT INTO nowhere (tag) VALUES (?)`, "x"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Execute(t.Context(), req)
			requireFailure(t, err, true)
		})
	}
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM readings`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestSQLiteWriteAfterCloseFails(t *testing.T) {
	t.Parallel()
	path, _ := newTargetDB(t)
	r := newExecutor(nil, map[string]targets.Database{"historian": {DSN: path, Timeout: time.Second}})
	require.NoError(t, r.Close())
	_, err := r.Execute(t.Context(), write("historian", `INSERT INTO readings (tag) VALUES (?)`, "x"))
	f := requireFailure(t, err, false)
	require.ErrorIs(t, f, errClosed)
}

func TestSQLiteDSN(t *testing.T) {
	t.Parallel()
	const p = "_pragma=busy_timeout(200)&_txlock=immediate"
	for dsn, want := range map[string]string{
		"/data/h.db":                 "file:/data/h.db?mode=rw&" + p,
		"data/a?b#c%d.db":            "file:data/a%3fb%23c%25d.db?mode=rw&" + p,
		"file:/data/h.db":            "file:/data/h.db?mode=rw&" + p,
		"file:/data/h.db?cache=priv": "file:/data/h.db?cache=priv&mode=rw&" + p,
		"file:/data/h.db?mode=ro":    "file:/data/h.db?mode=ro&" + p,
	} {
		require.Equal(t, want, sqliteDSN(dsn, 400*time.Millisecond), dsn)
	}
}
