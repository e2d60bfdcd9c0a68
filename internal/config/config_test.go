package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExampleFileIsValidAndMatchesDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../../dev/outpost.example.yaml", Default())
	require.NoError(t, err)
	want := Default()
	want.Central.Lists = map[string][]string{"ops": {"ops@example.com"}}
	require.Equal(t, want, cfg, "the example documents every default")
}

func TestEmptyFileMeansDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(strings.NewReader(""), Default())
	require.NoError(t, err)
	require.Equal(t, Default(), cfg)
}

func TestEveryProblemIsReportedWithItsPath(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader(`
site:
  id: "bad id"
  colour: red
  forward_interval: -1s
central:
  smtp:
    port: 70000
    max_retries: many
    tls: maybe
  store:
    driver: postgres
  lists:
    ops: [not-an-address]
`), Default())
	var problems Problems
	require.ErrorAs(t, err, &problems)
	got := map[string]int{}
	for _, p := range problems {
		got[p.Path] = p.Line
	}
	require.Equal(t, map[string]int{
		"site.id": 3, "site.colour": 4, "site.forward_interval": 5, "central.smtp.port": 8,
		"central.smtp.max_retries": 9, "central.smtp.tls": 10, "central.store.driver": 12,
		"central.lists.ops[0]": 14,
	}, got)
	require.Contains(t, err.Error(), `site.colour (line 4): unknown field`)
}

func TestNotYAML(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader("site: [unclosed"), Default())
	require.ErrorContains(t, err, "not valid YAML")
	_, err = Parse(strings.NewReader("- a list"), Default())
	require.ErrorContains(t, err, "must be a mapping")
}

func TestFileListsReplaceDefaultListsAndOverridesApply(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(strings.NewReader("central:\n  lists:\n    plant: [a@example.com]\n  smtp:\n    retry_interval: 5s\n"), DevDefault())
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"plant": {"a@example.com"}}, cfg.Central.Lists)
	require.Equal(t, 5*time.Second, cfg.Central.SMTP.RetryInterval)
	require.Equal(t, 3, cfg.Central.SMTP.MaxRetries, "unset fields keep the base")
}

func TestSQLServerDSNTakesPasswordFromEnvironment(t *testing.T) {
	os.Setenv("OUTPOST_TEST_DB_PW", "s3cr:t")
	defer os.Unsetenv("OUTPOST_TEST_DB_PW")
	s := CentralStore{Driver: DriverSQLServer, DSN: "sqlserver://outpost@db:1433?database=outpost", PasswordEnv: "OUTPOST_TEST_DB_PW"}
	dsn, err := s.SQLServerDSN()
	require.NoError(t, err)
	require.Equal(t, "sqlserver://outpost:s3cr%3At@db:1433?database=outpost", dsn)

	_, err = Parse(strings.NewReader("central:\n  store:\n    driver: sqlserver\n    dsn: sqlserver://sa:hunter2@db\n"), Default())
	require.ErrorContains(t, err, "must not contain the password")
}
