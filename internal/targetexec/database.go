package targetexec

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	_ "github.com/microsoft/go-mssqldb" // registers the "sqlserver" driver
	_ "modernc.org/sqlite"              // registers the "sqlite" driver

	"github.com/outpost-dev/outpost/internal/targets"
)

// errClosed is the underlying error of a write after Close.
var errClosed = errors.New("targets executor is closed")

// write makes one database attempt: the statement in its own transaction,
// on a connection that no state of it outlives.
func (e *Executor) write(ctx context.Context, req targets.Request) (targets.Result, error) {
	db, _ := e.defs.Database(req.Connection) // Execute validated req
	pool, err := e.pool(req.Connection, db)
	if err != nil {
		return targets.Result{}, err
	}
	timeout := db.TimeoutOrDefault()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pool.Conn(ctx)
	if err != nil {
		return targets.Result{}, dbFailure(ctx, timeout, fmt.Errorf("connect: %w", err), password(db))
	}
	n, err := execTx(ctx, conn, req.SQL, req.Args)
	releaseConn(conn, err != nil || len(db.Allow) > 0)
	if err != nil {
		return targets.Result{}, dbFailure(ctx, timeout, err, password(db))
	}
	return targets.Result{RowsAffected: n}, nil
}

// releaseConn returns conn to its pool, or closes it when discard is set:
// after a failure, or where the definition allows statements (PRAGMA,
// ATTACH, SET through EXEC) that leave state on the connection, so no
// request's connection state reaches the next one. SQL Server also resets
// a reused connection's session (go-mssqldb's ResetSession).
func releaseConn(conn *sql.Conn, discard bool) {
	if discard {
		// driver.ErrBadConn from Raw tells database/sql to close it.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	_ = conn.Close()
}

// execTx runs query with args in a transaction on conn and commits it.
func execTx(ctx context.Context, conn *sql.Conn, query string, args []any) (int64, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op once committed
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("exec: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rows affected: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}

// dbFailure classifies a failed write.
func dbFailure(ctx context.Context, timeout time.Duration, err error, secret string) *targets.Failure {
	msg := err.Error()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = fmt.Sprintf("no answer within %s: %s", timeout, msg)
	}
	permanent := ctx.Err() == nil && dbErrorIsPermanent(err)
	return &targets.Failure{Permanent: permanent, Message: redact(msg, secret), Err: err}
}

// pool returns the connection's pool, opening it on first use.
func (e *Executor) pool(name string, db targets.Database) (*sql.DB, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, &targets.Failure{Message: errClosed.Error(), Err: errClosed}
	}
	if p, ok := e.pools[name]; ok {
		return p, nil
	}
	p, err := openPool(db)
	if err != nil {
		return nil, err
	}
	e.pools[name] = p
	return p, nil
}

// openPool opens a pool for db; sql.Open connects lazily, so a missing file
// or an unreachable server shows on the first attempt, not here.
func openPool(db targets.Database) (*sql.DB, error) {
	switch db.DriverOrDefault() {
	case targets.DriverSQLite:
		p := sql.OpenDB(sqliteConnector{dsn: sqliteDSN(db.DSN, db.TimeoutOrDefault()), driver: guardedSQLiteDriver(db.Allow)})
		// One writer at a time per file; more connections would only queue on its lock.
		p.SetMaxOpenConns(1)
		return p, nil
	case targets.DriverSQLServer:
		dsn, err := db.SQLServerDSN()
		if err != nil {
			// The parse error quotes the DSN, which may hold a password.
			return nil, &targets.InvalidError{Field: "connection", Reason: "the SQL Server DSN is not a valid URL"}
		}
		p, err := sql.Open("sqlserver", dsn)
		if err != nil {
			return nil, &targets.InvalidError{Field: "connection", Reason: redact("open sqlserver: "+err.Error(), password(db))}
		}
		return p, nil
	}
	return nil, &targets.InvalidError{Field: "connection", Reason: fmt.Sprintf("unknown driver %q", db.Driver)}
}

// password is the SQL Server password, to keep it out of messages.
func password(db targets.Database) string {
	if db.DriverOrDefault() != targets.DriverSQLServer || db.PasswordEnv == "" {
		return ""
	}
	return os.Getenv(db.PasswordEnv)
}

// sqliteDSN opens path read-write without creating it (mode=rw: a missing
// file must fail, not become an empty database), waits for a lock half the
// attempt's timeout so a busy file reports SQLITE_BUSY before the deadline,
// and begins transactions IMMEDIATE so a writer never fails on a lock
// upgrade midway.
func sqliteDSN(dsn string, timeout time.Duration) string {
	params := fmt.Sprintf("_pragma=busy_timeout(%d)&_txlock=immediate", max(timeout/2/time.Millisecond, 1))
	if !strings.HasPrefix(dsn, "file:") {
		// In a URI, '%', '?' and '#' in the path would be read as syntax.
		esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
		return "file:" + esc.Replace(dsn) + "?mode=rw&" + params
	}
	base, query, hasQuery := strings.Cut(dsn, "?")
	if !hasQuery {
		return base + "?mode=rw&" + params
	}
	if q, err := url.ParseQuery(query); err == nil && q.Has("mode") {
		return dsn + "&" + params
	}
	return dsn + "&mode=rw&" + params
}
