package targetexec

import (
	"context"
	"database/sql/driver"
	"fmt"
	"slices"

	"modernc.org/sqlite"

	"github.com/outpost-dev/outpost/internal/targets"
)

// guardedSQLiteDriver is a SQLite driver whose every connection carries an
// authorizer: SQLite itself refuses what checkStatement refuses (schema
// changes, PRAGMA, ATTACH, DETACH), unless allow names the class. It is a
// driver of its own so the site store's connections are untouched.
func guardedSQLiteDriver(allow []string) *sqlite.Driver {
	d := &sqlite.Driver{}
	auth := sqliteAuthorizer(allow)
	d.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, _ string) error {
		reg, ok := c.(sqlite.AuthorizerRegisterer)
		if !ok {
			return fmt.Errorf("sqlite driver offers no authorizer")
		}
		return reg.RegisterAuthorizer(auth)
	})
	return d
}

// sqliteAuthorizer allows reading and changing rows, and the driver's own
// BEGIN and COMMIT; the rest only where allow names its class.
func sqliteAuthorizer(allow []string) sqlite.AuthorizerFn {
	return func(action sqlite.AuthorizerActionCode, _, _, _, _ string) sqlite.AuthorizerReturnCode {
		class, always := authClass(action)
		if always || slices.Contains(allow, class) {
			return sqlite.AuthorizerOK
		}
		return sqlite.AuthorizerDeny
	}
}

// authClass sorts an authorizer action into the statement class a
// definition's Allow names (targets.Allow*), or says it is allowed always:
// reading and changing rows.
func authClass(action sqlite.AuthorizerActionCode) (class string, always bool) {
	switch action {
	case sqlite.AuthInsert, sqlite.AuthUpdate, sqlite.AuthDelete, sqlite.AuthRead, sqlite.AuthSelect,
		sqlite.AuthFunction, sqlite.AuthRecursive, sqlite.AuthTransaction:
		// AuthTransaction is the driver's BEGIN/COMMIT around each write; a
		// script's own is refused by the statement check before it gets here.
		return "", true
	case sqlite.AuthSavepoint:
		// No Allow class names transaction control: a write runs in a
		// transaction of its own.
		return "transaction", false
	case sqlite.AuthPragma:
		return targets.AllowPragma, false
	case sqlite.AuthAttach, sqlite.AuthDetach:
		return targets.AllowAttach, false
	}
	return targets.AllowDDL, false
}

// sqliteConnector opens connections of driver on dsn for sql.OpenDB.
type sqliteConnector struct {
	dsn    string
	driver *sqlite.Driver
}

func (c sqliteConnector) Connect(context.Context) (driver.Conn, error) { return c.driver.Open(c.dsn) }
func (c sqliteConnector) Driver() driver.Driver                        { return c.driver }
