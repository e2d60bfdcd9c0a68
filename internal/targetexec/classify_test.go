package targetexec

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	mssql "github.com/microsoft/go-mssqldb"
	"github.com/stretchr/testify/require"
	sqlite3 "modernc.org/sqlite/lib"
)

func TestSQLiteCodeIsTransient(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{
		sqlite3.SQLITE_BUSY: true, sqlite3.SQLITE_BUSY_SNAPSHOT: true, sqlite3.SQLITE_LOCKED: true,
		sqlite3.SQLITE_CANTOPEN: true, sqlite3.SQLITE_IOERR: true, sqlite3.SQLITE_IOERR_SHORT_READ: true,
		sqlite3.SQLITE_FULL: true, sqlite3.SQLITE_NOMEM: true, sqlite3.SQLITE_PROTOCOL: true,
		// Read-only is a file's permissions or a connection's state, both of
		// which clear: retried, never lost.
		sqlite3.SQLITE_READONLY: true, sqlite3.SQLITE_READONLY_DBMOVED: true,
		sqlite3.SQLITE_ERROR: false, sqlite3.SQLITE_CONSTRAINT: false, sqlite3.SQLITE_CONSTRAINT_UNIQUE: false,
		sqlite3.SQLITE_MISMATCH: false, sqlite3.SQLITE_CORRUPT: false, sqlite3.SQLITE_AUTH: false,
	} {
		require.Equal(t, want, sqliteCodeIsTransient(code), code)
	}
}

func TestSQLServerNumberIsTransient(t *testing.T) {
	t.Parallel()
	for _, n := range []int32{1205, 1222, -2, 4060, 40613, 40197, 40501, 49918, 49919, 49920, 233, 10053, 10054, 10060, 64} {
		require.True(t, sqlServerNumberIsTransient(n), n)
	}
	// syntax, invalid object, unique key, primary key, conversion, login failed, permission
	for _, n := range []int32{102, 208, 2627, 2601, 245, 8114, 515, 547, 18456, 229, 0} {
		require.False(t, sqlServerNumberIsTransient(n), n)
	}
}

func TestDBErrorIsPermanent(t *testing.T) {
	t.Parallel()
	deadlockInChain := mssql.Error{Number: 3621, All: []mssql.Error{{Number: 1205}, {Number: 3621}}}
	for name, tt := range map[string]struct {
		err       error
		permanent bool
	}{
		"deadline":        {fmt.Errorf("exec: %w", context.DeadlineExceeded), false},
		"bad conn":        {driver.ErrBadConn, false},
		"eof":             {io.EOF, false},
		"unexpected eof":  {fmt.Errorf("read: %w", io.ErrUnexpectedEOF), false},
		"refused":         {&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
		"reset":           {fmt.Errorf("x: %w", syscall.ECONNRESET), false},
		"mssql deadlock":  {fmt.Errorf("exec: %w", mssql.Error{Number: 1205}), false},
		"mssql pointer":   {&mssql.Error{Number: 1222}, false},
		"deadlock in all": {deadlockInChain, false},
		"mssql syntax":    {fmt.Errorf("exec: %w", mssql.Error{Number: 102}), true},
		"mssql unique":    {mssql.Error{Number: 2627}, true},
		"uncoded":         {errors.New("login error: mssql: login failed"), false},
	} {
		require.Equal(t, tt.permanent, dbErrorIsPermanent(tt.err), name)
	}
}
