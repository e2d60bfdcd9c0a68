package targetexec

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	mssql "github.com/microsoft/go-mssqldb"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dbErrorIsPermanent reports whether retrying cannot fix err. Only an error
// the database coded as one retrying cannot fix is permanent; anything else
// is retried, because go-mssqldb reports some connection and login
// failures as plain text, and a wrong "permanent" loses the write while a
// wrong "transient" costs retries before it parks.
func dbErrorIsPermanent(err error) bool {
	if isConnectionError(err) {
		return false
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return !sqliteCodeIsTransient(se.Code())
	}
	if nums := sqlServerNumbers(err); len(nums) > 0 {
		for _, n := range nums {
			if sqlServerNumberIsTransient(n) {
				return false
			}
		}
		return true
	}
	return false
}

// isConnectionError reports a timeout or a lost or refused connection.
func isConnectionError(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.As(err, &ne)
}

// sqliteCodeIsTransient reports whether a SQLite result code (primary or
// extended) names a condition that can clear: a lock, a missing, unreadable
// or read-only file (permissions, a read-only mount, or state left on a
// connection, which is discarded after a failure), a full disk, memory.
func sqliteCodeIsTransient(code int) bool {
	switch code & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR,
		sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_READONLY:
		return true
	}
	return false
}

// sqlServerNumbers lists the error numbers of a SQL Server error, every
// message the server sent, or nil when err is not one.
func sqlServerNumbers(err error) []int32 {
	var e mssql.Error
	var pe *mssql.Error
	switch {
	case errors.As(err, &e):
	case errors.As(err, &pe) && pe != nil:
		e = *pe
	default:
		return nil
	}
	nums := []int32{e.Number}
	for _, a := range e.All {
		nums = append(nums, a.Number)
	}
	return nums
}

// sqlServerNumberIsTransient reports whether a SQL Server error number names
// a condition that can clear: deadlock, lock or query timeout, a database
// unavailable, busy or failing over, a dropped connection.
func sqlServerNumberIsTransient(n int32) bool {
	switch n {
	case 1205, // chosen as deadlock victim
		1222,  // lock request time out
		-2,    // timeout expired
		4060,  // cannot open database
		40613, // database not currently available
		40197, // service error processing the request
		40501, // service is busy
		49918, // cannot process request: not enough resources
		49919, // cannot process create or update request: too many operations
		49920, // cannot process request: too many operations
		233,   // no process on the other end of the pipe
		10053, // connection aborted
		10054, // connection reset by peer
		10060, // connection timed out
		64:    // network name no longer available
		return true
	}
	return false
}
