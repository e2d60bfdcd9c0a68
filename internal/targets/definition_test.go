package targets

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// A definition read from YAML (the config file's site section) takes the
// defaults for every field it leaves out, and the file's key names.
func TestDefinitionsReadFromYAMLWithDefaults(t *testing.T) {
	t.Parallel()
	var sys ExternalSystem
	require.NoError(t, yaml.Unmarshal([]byte("base_url: https://erp.local/api\nretry_interval: 5s\nmethods:\n  create: {path: /orders}\n"), &sys))
	want := DefaultExternalSystem()
	want.BaseURL, want.RetryInterval = "https://erp.local/api", 5*time.Second
	want.Methods = map[string]Method{"create": {Verb: "POST", Path: "/orders"}}
	require.Equal(t, want, sys)

	var db Database
	require.NoError(t, yaml.Unmarshal([]byte("dsn: plant.db\nmax_retries: 0\nallow: [ddl]\n"), &db))
	wantDB := DefaultDatabase()
	wantDB.DSN, wantDB.MaxRetries, wantDB.Allow = "plant.db", 0, []string{AllowDDL}
	require.Equal(t, wantDB, db)
}

// Check applies the config file's rules to definitions given in code and
// names each problem by the file's path.
func TestCheckNamesEveryProblem(t *testing.T) {
	t.Parallel()
	sys := DefaultExternalSystem()
	sys.BaseURL, sys.Timeout = "erp.local", 0
	sys.Methods = map[string]Method{"bad name": {Verb: "FETCH", Path: "orders"}}
	db := DefaultDatabase()
	db.Driver, db.DSN, db.Allow, db.MaxRetries = DriverSQLServer, "sqlserver://sa:pw@db", []string{AllowPragma}, -1
	err := Check(map[string]ExternalSystem{"erp": sys}, map[string]Database{"historian": db, "": DefaultDatabase()})
	require.EqualError(t, err, `10 problem(s):
  external_systems.erp.base_url: "erp.local" must be an http:// or https:// URL
  external_systems.erp.methods.bad name: name "bad name" must be 1-64 letters, digits, '_' or '-'
  external_systems.erp.methods.bad name.verb: "FETCH" must be one of GET, POST, PUT, PATCH, DELETE
  external_systems.erp.methods.bad name.path: "orders" must start with /
  external_systems.erp.timeout: 0s must be a positive duration such as 10s or 1m
  databases.: name "" must be 1-64 letters, digits, '_' or '-'
  databases..dsn: must not be empty
  databases.historian.dsn: must not contain the password: name its variable in password_env
  databases.historian.allow[0]: "pragma" is not a statement class of a sqlserver database: use ddl, exec
  databases.historian.max_retries: -1 must be 0 or more`)
	require.NoError(t, Check(nil, nil))
}
