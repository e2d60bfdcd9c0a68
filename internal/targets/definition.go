package targets

import (
	"net/url"
	"os"
	"time"
)

// The definitions of the targets cached calls and writes reach, owned
// here: the SDK's site.Options take them, and the config file's
// site.external_systems and site.databases are read straight into them
// (the yaml tags; package config aliases the types). A field an entry of
// the file leaves out takes its default (UnmarshalYAML); code starts from
// DefaultExternalSystem or DefaultDatabase. Check applies the rules.

// ExternalSystem is an HTTP system a cached call goes to.
type ExternalSystem struct {
	// BaseURL is prefixed to every method's path, e.g.
	// https://erp.plant.local/api. Required.
	BaseURL string `yaml:"base_url"`
	// Methods maps a method name to its HTTP verb and path. Required.
	Methods map[string]Method `yaml:"methods"`
	// Timeout bounds one attempt. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// AuthHeader is the request header that carries the secret. Default Authorization.
	AuthHeader string `yaml:"auth_header"`
	// AuthEnv names the environment variable holding the header's value
	// (e.g. "Bearer ..."). Default empty: no auth header.
	AuthEnv string `yaml:"auth_env"`
	// IdempotencyHeader carries the operation's id on every attempt, so the
	// system can recognise a retry of a request it already processed.
	// Default Idempotency-Key.
	IdempotencyHeader string `yaml:"idempotency_header"`
	// MaxRetries is how many retries follow a failed immediate attempt before
	// the call parks. Default 10.
	MaxRetries int `yaml:"max_retries"`
	// RetryInterval is the fixed time between attempts. Default 1m.
	RetryInterval time.Duration `yaml:"retry_interval"`
}

// Method is one operation of an external system.
type Method struct {
	// Verb is GET, POST, PUT, PATCH or DELETE. Default (in the file) POST.
	Verb string `yaml:"verb"`
	// Path is appended to BaseURL; each {name} in it is replaced by the
	// call's parameter of that name. Other parameters go in the JSON body
	// (POST, PUT, PATCH) or the query string (GET, DELETE). Default "".
	Path string `yaml:"path"`
}

// Database is a database a cached write goes to.
type Database struct {
	// Driver is DriverSQLite or DriverSQLServer. Default sqlite.
	Driver string `yaml:"driver"`
	// DSN is the SQLite file path (opened read-write, never created) or the
	// SQL Server URL without its password. Required.
	DSN string `yaml:"dsn"`
	// PasswordEnv names the variable holding the SQL Server password.
	// Default empty: the DSN carries no password.
	PasswordEnv string `yaml:"password_env"`
	// Timeout bounds one attempt, including waiting for a lock. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetries is how many retries follow a failed immediate attempt before
	// the write parks. Default 10.
	MaxRetries int `yaml:"max_retries"`
	// RetryInterval is the fixed time between attempts. Default 1m.
	RetryInterval time.Duration `yaml:"retry_interval"`
	// Allow lists the statement classes (Allow*) a write may run beside
	// INSERT, UPDATE, DELETE (REPLACE, MERGE): ddl (CREATE, DROP, ALTER, …),
	// pragma and attach (ATTACH, DETACH; SQLite), exec (stored procedures;
	// SQL Server). Default none: scripts change data, not the database.
	Allow []string `yaml:"allow"`
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

// DefaultExternalSystem is an external system with only the defaults, as
// a config file entry that names none of its fields.
func DefaultExternalSystem() ExternalSystem {
	return ExternalSystem{Timeout: 30 * time.Second, AuthHeader: "Authorization", IdempotencyHeader: DefaultIdempotencyHeader,
		MaxRetries: 10, RetryInterval: time.Minute}
}

// DefaultDatabase is a SQLite database with only the defaults.
func DefaultDatabase() Database {
	return Database{Driver: DriverSQLite, Timeout: 30 * time.Second, MaxRetries: 10, RetryInterval: time.Minute}
}

// UnmarshalYAML fills the fields an entry leaves out with their defaults.
// It has the form of yaml.v3's older Unmarshaler, which yaml.v3 still
// honours, so that the definitions import no YAML package.
func (e *ExternalSystem) UnmarshalYAML(decode func(any) error) error {
	type plain ExternalSystem
	*e = DefaultExternalSystem()
	return decode((*plain)(e))
}

// UnmarshalYAML fills the fields an entry leaves out with their defaults.
func (m *Method) UnmarshalYAML(decode func(any) error) error {
	type plain Method
	*m = Method{Verb: "POST"}
	return decode((*plain)(m))
}

// UnmarshalYAML fills the fields an entry leaves out with their defaults.
func (d *Database) UnmarshalYAML(decode func(any) error) error {
	type plain Database
	*d = DefaultDatabase()
	return decode((*plain)(d))
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

// DriverOrDefault is Driver, or DriverSQLite when it is empty.
func (d Database) DriverOrDefault() string {
	if d.Driver == "" {
		return DriverSQLite
	}
	return d.Driver
}

// TimeoutOrDefault bounds one attempt: Timeout, or 30s when it is not set.
func (e ExternalSystem) TimeoutOrDefault() time.Duration { return timeoutOr(e.Timeout) }

// TimeoutOrDefault bounds one attempt: Timeout, or 30s when it is not set.
func (d Database) TimeoutOrDefault() time.Duration { return timeoutOr(d.Timeout) }
