package targets

import (
	"net/url"
	"os"
	"time"
)

// The definitions of the targets cached calls and writes reach. The site
// config's external_systems and databases (package config) are translated
// into these at the edge (internal/siteconfig); the SDK's site.Options
// take them directly.

// ExternalSystem is an HTTP system a cached call goes to.
type ExternalSystem struct {
	// BaseURL is prefixed to every method's path, e.g. https://erp.plant.local/api.
	BaseURL string
	// Methods maps a method name to its HTTP verb and path.
	Methods map[string]Method
	// Timeout bounds one attempt.
	Timeout time.Duration
	// AuthHeader is the request header that carries the secret.
	AuthHeader string
	// AuthEnv names the environment variable holding the header's value
	// (e.g. "Bearer ..."); empty: no auth header.
	AuthEnv string
	// IdempotencyHeader carries the operation's id on every attempt, so the
	// system can recognise a retry of a request it already processed.
	IdempotencyHeader string
	// MaxRetries is how many retries follow a failed immediate attempt
	// before the call parks.
	MaxRetries int
	// RetryInterval is the fixed time between attempts.
	RetryInterval time.Duration
}

// Method is one operation of an external system.
type Method struct {
	// Verb is GET, POST, PUT, PATCH or DELETE.
	Verb string
	// Path is appended to BaseURL; each {name} in it is replaced by the
	// call's parameter of that name. Other parameters go in the JSON body
	// (POST, PUT, PATCH) or the query string (GET, DELETE).
	Path string
}

// Database is a database a cached write goes to.
type Database struct {
	// Driver is DriverSQLite or DriverSQLServer.
	Driver string
	// DSN is the SQLite file path (opened read-write, never created) or the
	// SQL Server URL without its password.
	DSN string
	// PasswordEnv names the variable holding the SQL Server password; empty:
	// the DSN carries no password.
	PasswordEnv string
	// Timeout bounds one attempt, including waiting for a lock.
	Timeout time.Duration
	// MaxRetries is how many retries follow a failed immediate attempt
	// before the write parks.
	MaxRetries int
	// RetryInterval is the fixed time between attempts.
	RetryInterval time.Duration
	// Allow lists the statement classes (Allow*) a write may run beside
	// INSERT, UPDATE, DELETE (REPLACE, MERGE).
	Allow []string
}

// Database drivers.
const (
	DriverSQLite    = "sqlite"
	DriverSQLServer = "sqlserver"
)

// Statement classes a Database may allow: ddl (CREATE, DROP, ALTER, …),
// pragma and attach (ATTACH, DETACH; SQLite), exec (stored procedures; SQL
// Server).
const (
	AllowDDL    = "ddl"
	AllowPragma = "pragma"
	AllowAttach = "attach"
	AllowExec   = "exec"
)

// DefaultIdempotencyHeader is ExternalSystem.IdempotencyHeader's default.
const DefaultIdempotencyHeader = "Idempotency-Key"

// DefaultExternalSystem is an external system with only the defaults
// (the same as a config file entry's; a test in internal/siteconfig keeps
// them equal).
func DefaultExternalSystem() ExternalSystem {
	return ExternalSystem{Timeout: 30 * time.Second, AuthHeader: "Authorization", IdempotencyHeader: DefaultIdempotencyHeader,
		MaxRetries: 10, RetryInterval: time.Minute}
}

// DefaultDatabase is a SQLite database with only the defaults.
func DefaultDatabase() Database {
	return Database{Driver: DriverSQLite, Timeout: 30 * time.Second, MaxRetries: 10, RetryInterval: time.Minute}
}

// AuthValue reads the auth header's value from its variable ("" when none).
func (e ExternalSystem) AuthValue() string {
	if e.AuthEnv == "" {
		return ""
	}
	return os.Getenv(e.AuthEnv)
}

// SQLServerDSN is the DSN with the password from the variable PasswordEnv,
// when the URL names its user.
func (d Database) SQLServerDSN() (string, error) {
	u, err := url.Parse(d.DSN)
	if err != nil {
		return "", err
	}
	if pw, ok := os.LookupEnv(d.PasswordEnv); ok && d.PasswordEnv != "" && u.User != nil {
		u.User = url.UserPassword(u.User.Username(), pw)
	}
	return u.String(), nil
}
