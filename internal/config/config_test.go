package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestExampleFileIsValidAndMatchesDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../../dev/outpost.example.yaml", Default())
	require.NoError(t, err)
	want := Default()
	want.Central.Lists = map[string][]string{"ops": {"ops@example.com"}}
	erp := DefaultExternalSystem()
	erp.BaseURL, erp.AuthEnv = "https://erp.plant.local/api", "OUTPOST_ERP_TOKEN"
	erp.Methods = map[string]Method{"createOrder": {Verb: "POST", Path: "/orders"}, "getOrder": {Verb: "GET", Path: "/orders/{id}"}}
	want.Site.ExternalSystems = map[string]ExternalSystem{"erp": erp}
	historian := DefaultDatabase()
	historian.DSN = "historian.db"
	want.Site.Databases = map[string]Database{"historian": historian}
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
    driver: mysql
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
	dsn, err := s.DSNWithPassword()
	require.NoError(t, err)
	require.Equal(t, "sqlserver://outpost:s3cr%3At@db:1433?database=outpost", dsn)

	_, err = Parse(strings.NewReader("central:\n  store:\n    driver: sqlserver\n    dsn: sqlserver://sa:hunter2@db\n"), Default())
	require.ErrorContains(t, err, "must not contain the password")
}

// A PostgreSQL central store names its server in a postgres:// URL without
// the password, which comes from the variable password_env names.
func TestPostgresStoreNeedsItsDSNWithoutPassword(t *testing.T) {
	store := func(yaml string) error {
		_, err := Parse(strings.NewReader("central:\n  store:\n    driver: postgres\n"+yaml), Default())
		return err
	}
	require.ErrorContains(t, store(""), "central.store.dsn: required with driver postgres, e.g. postgres://outpost@db:5432/outpost")
	require.ErrorContains(t, store("    dsn: sqlserver://outpost@db\n"), "central.store.dsn (line 4): must be a postgres:// URL")
	require.ErrorContains(t, store("    dsn: postgres://outpost:hunter2@db/outpost\n"), "must not contain the password: put it in $OUTPOST_DB_PASSWORD")
	require.NoError(t, store("    dsn: postgresql://outpost@db:5432/outpost?sslmode=verify-full\n"))

	t.Setenv("OUTPOST_TEST_PG_PW", "s3cr:t")
	s := CentralStore{Driver: DriverPostgres, DSN: "postgres://outpost@db:5432/outpost?sslmode=verify-full", PasswordEnv: "OUTPOST_TEST_PG_PW"}
	dsn, err := s.DSNWithPassword()
	require.NoError(t, err)
	require.Equal(t, "postgres://outpost:s3cr%3At@db:5432/outpost?sslmode=verify-full", dsn)
}

func TestDefinitionsTakeDefaultsAndReportProblems(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(strings.NewReader(`
site:
  external_systems:
    erp:
      base_url: http://erp.local
      methods:
        ping: {path: /ping}
  databases:
    historian:
      dsn: h.db
      max_retries: 0
`), DevDefault())
	require.NoError(t, err)
	require.Equal(t, []string{"erp"}, sortedKeys(cfg.Site.ExternalSystems), "the file's systems replace the dev defaults")
	erp := cfg.Site.ExternalSystems["erp"]
	require.Equal(t, "POST", erp.Methods["ping"].Verb, "verb defaults to POST")
	require.Equal(t, DefaultExternalSystem().RetryInterval, erp.RetryInterval)
	require.Equal(t, 0, cfg.Site.Databases["historian"].MaxRetries, "an explicit 0 is kept, not defaulted")
	require.Equal(t, DriverSQLite, cfg.Site.Databases["historian"].Driver)

	_, err = Parse(strings.NewReader(`
site:
  external_systems:
    erp:
      base_url: ftp://erp
      methods:
        ping: {verb: FETCH, path: ping}
      retry_interval: 0s
  databases:
    plant:
      driver: sqlserver
      dsn: sqlserver://sa:pw@db
    bad name:
      dsn: x.db
`), Default())
	var problems Problems
	require.ErrorAs(t, err, &problems)
	paths := map[string]bool{}
	for _, p := range problems {
		paths[p.Path] = true
	}
	for _, want := range []string{
		"site.external_systems.erp.base_url", "site.external_systems.erp.methods.ping.verb",
		"site.external_systems.erp.methods.ping.path", "site.external_systems.erp.retry_interval",
		"site.databases.plant.dsn", "site.databases.bad name",
	} {
		require.True(t, paths[want], "expected a problem at %s in:\n%v", want, err)
	}
}

// Every field of Config appears in the example file (a map's fields under
// its example entry), so a new field cannot go undocumented.
func TestExampleFileShowsEveryField(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../dev/outpost.example.yaml")
	require.NoError(t, err)
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	var missing []string
	missingFields(reflect.TypeOf(Config{}), doc.Content[0], "", &missing)
	require.Empty(t, missing, "fields missing from dev/outpost.example.yaml")
}

// missingFields appends the yaml path of every field of struct type typ
// that mapping node lacks.
func missingFields(typ reflect.Type, node *yaml.Node, path string, missing *[]string) {
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		child := mappingValue(node, name)
		if child == nil {
			*missing = append(*missing, path+name)
			continue
		}
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct && ft != reflect.TypeOf(time.Time{}):
			missingFields(ft, child, path+name+".", missing)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct && len(child.Content) >= 2:
			// The first entry of a map of definitions is its documented example.
			missingFields(ft.Elem(), child.Content[1], path+name+"."+child.Content[0].Value+".", missing)
		}
	}
}

func mappingValue(node *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == key {
			return node.Content[i+1]
		}
	}
	return nil
}

// Mistakes are told in plain words: a tab as a tab, a wrong type as what
// the field wants and what it got, never YAML's tags or Go's type names.
func TestProblemsInPlainWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ yaml, want string }{
		{"site:\n\tid: x\n", "line 2: a tab character: YAML indents with spaces only (replace the tab with spaces)"},
		// YAML places these at the value the tab follows (line 4), not the tab.
		{"site:\n  id: plant-1\n  listen: 127.0.0.1:8480\n  store: x.db\n\tforward_interval: 5s\n", "line 5: a tab character: YAML indents with spaces only (replace the tab with spaces)"},
		{"site:\n  id: plant-1\n  listen: 127.0.0.1:8480\n  store: x.db\n  \tforward_interval: 5s\n", "line 5: a tab character: YAML indents with spaces only (replace the tab with spaces)"},
		{"central:\n  lists:\n    ops:\n      - a@example.com\n\t    - b@example.com\n", "line 5: a tab character: YAML indents with spaces only (replace the tab with spaces)"},
		{"site:\n  id: [1, 2]\n", "site.id (line 2): must be text, not a list"},
		{"site: hello\n", `site (line 1): must be a section of fields (name: value lines indented under it), not the text "hello"`},
		{"site:\n  databases:\n    h: 5\n", "site.databases.h (line 3): must be a section of fields (name: value lines indented under it), not the number 5"},
		{"site:\n  forward_interval: soon\n", `site.forward_interval (line 2): must be a duration like 30s or 5m, not the text "soon"`},
		{"site:\n  forward_batch: lots\n", `site.forward_batch (line 2): must be a whole number, not the text "lots"`},
	} {
		_, err := Parse(strings.NewReader(tc.yaml), Default())
		require.ErrorContains(t, err, tc.want, tc.yaml)
		for _, jargon := range []string{"!!", "map[string]interface", "config.", "unmarshal"} {
			require.NotContains(t, err.Error(), jargon, tc.yaml)
		}
	}
}

func TestMaxBodyBytesIsBounded(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader("site:\n  max_body_bytes: 10485760\n"), Default())
	require.ErrorContains(t, err, "site.max_body_bytes (line 2): 10485760 is over 262144 (256 KiB)")
	_, err = Parse(strings.NewReader("site:\n  max_body_bytes: 262144\n"), Default())
	require.NoError(t, err)
}

// config check takes a collector's OTLP/gRPC address as an http(s) URL of
// a host and port, and names the field when it is anything else.
func TestOTLPEndpointIsChecked(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "http://otel-collector:4317", "https://collector.example.com:4317", "http://127.0.0.1:4317/"} {
		cfg, err := Parse(strings.NewReader("telemetry:\n  otlp_endpoint: \""+ok+"\"\n"), Default())
		require.NoError(t, err, ok)
		require.Equal(t, ok, cfg.Telemetry.OTLPEndpoint)
	}
	for _, bad := range []string{"otel-collector:4317", "grpc://otel-collector:4317", "http://otel-collector", "http://:4317",
		"http://otel-collector:4317/v1/traces", "http://user:pw@otel-collector:4317"} {
		_, err := Parse(strings.NewReader("telemetry:\n  otlp_endpoint: \""+bad+"\"\n"), Default())
		require.ErrorContains(t, err, "telemetry.otlp_endpoint (line 2): \""+bad+"\" must be a collector's OTLP/gRPC address", bad)
	}
}

// config check refuses an API reachable beyond this host without a token.
func TestListenBeyondLoopbackNeedsAToken(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader("site:\n  listen: 0.0.0.0:8480\n"), Default())
	require.ErrorContains(t, err, `site.listen (line 2): "0.0.0.0:8480" is reachable beyond this host: name a token in site.api_tokens`)
	_, err = Parse(strings.NewReader("site:\n  listen: 0.0.0.0:8480\n  api_tokens: {scripts: OUTPOST_SITE_TOKEN}\n"), Default())
	require.NoError(t, err)
	for listen, loopback := range map[string]bool{"127.0.0.1:8480": true, "[::1]:8480": true, "localhost:8480": true,
		":8480": false, "0.0.0.0:8480": false, "192.0.2.7:8480": false, "plant-1:8480": false} {
		require.Equal(t, loopback, IsLoopback(listen), listen)
	}
}

// config check refuses an outbox page reachable beyond this host that asks
// nobody to sign in, and names each bad page_auth field.
func TestPageAuthIsChecked(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader("central:\n  listen: 0.0.0.0:8481\n"), Default())
	require.ErrorContains(t, err, `central.listen (line 2): "0.0.0.0:8481" is reachable beyond this host: configure central.page_auth`)
	hash := "$2a$04$nXU1qPykziFMiobqNWK/3O235jKw7vXpfM5aVG0Ys5xVzayAoItCi" // bcrypt of "x", cost 4
	_, err = Parse(strings.NewReader("central:\n  listen: 0.0.0.0:8481\n  page_auth:\n    users: {ana: {password_hash: \""+hash+"\", role: operator}}\n"), Default())
	require.NoError(t, err)

	_, err = Parse(strings.NewReader(`central:
  page_auth:
    users:
      ana: {password_hash: hunter2, role: admin}
    proxy_header: X-Forwarded-User
    trusted_proxies: [10.0.0.0/8, proxy.plant]
  codec_origins: [https://ui.example.com/path]
`), Default())
	for _, want := range []string{
		"central.page_auth.users.ana.password_hash (line 4): is not a bcrypt hash: make one with `outpost central hash-password`",
		`central.page_auth.users.ana.role (line 4): "admin"`,
		`central.page_auth.trusted_proxies[1] (line 6): "proxy.plant" is not an IP address or a CIDR prefix`,
		`central.codec_origins[0] (line 7): "https://ui.example.com/path" must be an origin`,
	} {
		require.ErrorContains(t, err, want)
	}
	_, err = Parse(strings.NewReader("central:\n  page_auth:\n    proxy_header: X-Forwarded-User\n"), Default())
	require.ErrorContains(t, err, "central.page_auth.trusted_proxies")
}

// config check reads the mutual-TLS files it is given.
func TestTemporalTLSFilesAreChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	require.NoError(t, os.WriteFile(junk, []byte("not a certificate"), 0o600))
	_, err := Parse(strings.NewReader("temporal:\n  tls_cert_file: "+junk+"\n"), Default())
	require.ErrorContains(t, err, "temporal.tls_cert_file (line 2): give both tls_cert_file and tls_key_file, or neither")
	_, err = Parse(strings.NewReader("temporal:\n  tls_cert_file: "+junk+"\n  tls_key_file: "+junk+"\n  tls_ca_file: "+junk+"\n"), Default())
	require.ErrorContains(t, err, "temporal.tls_cert_file (line 2): "+junk+" with "+junk+": tls: failed to find any PEM data")
	require.ErrorContains(t, err, "temporal.tls_ca_file (line 4): "+junk+" holds no PEM certificate")
	_, err = Parse(strings.NewReader("temporal:\n  tls_ca_file: "+filepath.Join(dir, "missing.pem")+"\n"), Default())
	require.ErrorContains(t, err, "no such file or directory")
}

// A node name central cannot store is refused by config check.
func TestSiteNodeIsBounded(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader("site:\n  node: "+strings.Repeat("n", 65)+"\n"), Default())
	require.ErrorContains(t, err, "site.node (line 2): ")
	require.ErrorContains(t, err, "central stores it in a 64-character column")
}

// config check refuses a holder_grace a live idle daemon's poller could
// outlast: a waiting daemon would take the site from it.
func TestHolderGraceOutlastsALongPoll(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader("site:\n  holder_grace: 45s\n"), Default())
	require.ErrorContains(t, err, "site.holder_grace (line 2): 45s must be longer than site.poller_check_interval plus a minute (1m30s)")
	_, err = Parse(strings.NewReader("site:\n  poller_check_interval: 10s\n  holder_grace: 75s\n"), Default())
	require.NoError(t, err)
}

// A pair's settings are checked: the peer's address is a URL, the shared
// secret's variable is named, the mode is known and failover_after leaves
// room for heartbeats.
func TestPairSettingsAreChecked(t *testing.T) {
	t.Parallel()
	for yml, want := range map[string]string{
		"site:\n  peer:\n    address: 10.0.0.2:8480\n    secret_env: S\n": "site.peer.address (line 3): \"10.0.0.2:8480\" must be the other node's API as a URL",
		"site:\n  peer:\n    address: http://10.0.0.2:8480\n":             "site.peer.secret_env",
		"site:\n  peer:\n    prefer: true\n":                              "site.peer.address: set the other node's address",
		"site:\n  replication: eventually\n":                              "site.replication (line 2)",
		"site:\n  failover_after: 200ms\n":                                "site.failover_after (line 2): 200ms is under 1s",
	} {
		_, err := Parse(strings.NewReader(yml), Default())
		require.ErrorContains(t, err, want, yml)
	}
	cfg, err := Parse(strings.NewReader("site:\n  peer:\n    address: http://10.0.0.2:8480\n    secret_env: S\n  replication: sync\n"), Default())
	require.NoError(t, err)
	require.Equal(t, ReplicationSync, cfg.Site.Replication)
	require.Equal(t, 5*time.Second, cfg.Site.FailoverAfter)
}

// An entry the file names that the base has too keeps the base's fields the
// file leaves out, at every depth: overriding the demo system's base_url
// keeps its methods and retry policy, overriding one method's path keeps
// its verb, overriding a database's timeout keeps its dsn.
func TestOverrideMergesFieldByField(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(strings.NewReader(`
site:
  external_systems:
    demo:
      base_url: http://127.0.0.1:9999/api
      methods:
        getOrder: {path: "/v2/orders/{id}"}
  databases:
    historian: {timeout: 1s}
`), DevDefault())
	require.NoError(t, err)
	base := DevDefault().Site
	demo := cfg.Site.ExternalSystems["demo"]
	require.Equal(t, "http://127.0.0.1:9999/api", demo.BaseURL)
	require.Equal(t, Method{Verb: "GET", Path: "/v2/orders/{id}"}, demo.Methods["getOrder"], "the method keeps its verb")
	require.Equal(t, []string{"getOrder"}, sortedKeys(demo.Methods), "the file's methods are the methods there are")
	require.Equal(t, base.ExternalSystems["demo"].MaxRetries, demo.MaxRetries)
	require.Equal(t, base.ExternalSystems["demo"].RetryInterval, demo.RetryInterval)
	historian := cfg.Site.Databases["historian"]
	require.Equal(t, time.Second, historian.Timeout)
	require.Equal(t, base.Databases["historian"].DSN, historian.DSN)
	require.Equal(t, base.Databases["historian"].MaxRetries, historian.MaxRetries)

	cfg, err = Parse(strings.NewReader("site:\n  external_systems:\n    demo: {base_url: \"http://127.0.0.1:9999/api\"}\n"), DevDefault())
	require.NoError(t, err, "a base_url alone keeps the demo system's methods")
	require.Equal(t, base.ExternalSystems["demo"].Methods, cfg.Site.ExternalSystems["demo"].Methods)
}

// The dev defaults' demo system and database are where dev.demo_system and
// dev.demo_database say: a file that moves them moves the entries with them,
// unless it names the entry's base_url or dsn itself.
func TestMovingTheDemoSystemMovesItsEntry(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(strings.NewReader("dev:\n  demo_system: 127.0.0.1:9191\n  demo_database: data/h.db\n"), DevDefault())
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:9191/api", cfg.Site.ExternalSystems["demo"].BaseURL)
	require.Equal(t, "data/h.db", cfg.Site.Databases["historian"].DSN)

	cfg, err = Parse(strings.NewReader(`
dev: {demo_system: "127.0.0.1:9191", demo_database: data/h.db}
site:
  external_systems:
    demo: {base_url: "http://demo.example:80/api"}
  databases:
    historian: {dsn: other.db}
`), DevDefault())
	require.NoError(t, err)
	require.Equal(t, "http://demo.example:80/api", cfg.Site.ExternalSystems["demo"].BaseURL, "an explicit base_url stays")
	require.Equal(t, "other.db", cfg.Site.Databases["historian"].DSN, "an explicit dsn stays")
}

// A region must be a valid namespace and task-queue name, and a file with
// both sections must have its site in a region its central serves, routed
// the same way.
func TestRegionsAreChecked(t *testing.T) {
	t.Parallel()
	cfg, err := Parse(strings.NewReader("site:\n  region: eu\n  region_queue: true\ncentral:\n  region: eu\n  region_queue: true\n"), Default())
	require.NoError(t, err)
	require.Equal(t, "eu", cfg.Site.Region)
	require.True(t, cfg.Central.RegionQueue)
	_, err = Parse(strings.NewReader("site:\n  region: eu\n"), Default())
	require.NoError(t, err, "a site alone names any region")
	for _, tc := range []struct{ yaml, want string }{
		{"site:\n  region: EU-West\n", `site.region (line 2): region "EU-West": want 1-63 lower-case letters, digits and '-'`},
		{"central:\n  region: eu_1\n", `central.region (line 2): region "eu_1": want 1-63 lower-case letters, digits and '-'`},
		{"site:\n  region_queue: true\n", "site.region_queue (line 2): needs site.region: the queue is outpost-central-<region>"},
		{"site:\n  region: eu\ncentral:\n  region: us\n", `site.region (line 2): site is in region "eu" but this file's central serves region "us"`},
		{"site:\n  region: eu\ncentral:\n  listen: 127.0.0.1:8481\n", `site.region (line 2): site is in region "eu" but this file's central serves no region`},
		{"site:\n  id: p\ncentral:\n  region: us\n", `site.region: site is in no region but this file's central serves region "us"`},
		{"site:\n  region: eu\n  region_queue: true\ncentral:\n  region: eu\n", "site.region_queue (line 3): true here but central.region_queue is false: both must route region eu the same way"},
	} {
		_, err := Parse(strings.NewReader(tc.yaml), Default())
		require.ErrorContains(t, err, tc.want, tc.yaml)
	}
}

// A page user's regions must be valid region names, and a central that
// serves no region cannot have users limited to regions: none of them
// could ever use its page.
func TestPageUserRegionsAreChecked(t *testing.T) {
	t.Parallel()
	hash := "$2a$04$nXU1qPykziFMiobqNWK/3O235jKw7vXpfM5aVG0Ys5xVzayAoItCi" // bcrypt of "x", cost 4
	user := func(regions string) string {
		return "    users:\n      ana: {password_hash: \"" + hash + "\", role: operator, regions: " + regions + "}\n"
	}
	cfg, err := Parse(strings.NewReader("central:\n  region: eu\n  page_auth:\n"+user("[eu, us]")), Default())
	require.NoError(t, err)
	require.Equal(t, []string{"eu", "us"}, cfg.Central.PageAuth.Users["ana"].Regions)
	_, err = Parse(strings.NewReader("central:\n  region: eu\n  page_auth:\n"+user("[us]")), Default())
	require.NoError(t, err, "one page_auth may serve every region's central: ana is refused on eu's page")

	_, err = Parse(strings.NewReader("central:\n  region: eu\n  page_auth:\n"+user("[eu, EU]")), Default())
	require.ErrorContains(t, err, `central.page_auth.users.ana.regions[1] (line 5): region "EU": want 1-63 lower-case letters, digits and '-'`)
	_, err = Parse(strings.NewReader("central:\n  page_auth:\n"+user("[eu]")), Default())
	require.ErrorContains(t, err, "central.page_auth.users.ana.regions (line 4): this central serves no region (central.region), so a user limited to regions can never use its page: set central.region or remove regions")
}

// The forwarder starts with forward_parallelism hand-offs in flight, so its
// bound cannot be lower.
func TestForwardMaxInFlightIsAtLeastTheParallelism(t *testing.T) {
	t.Parallel()
	_, err := Parse(strings.NewReader("site:\n  forward_parallelism: 16\n  forward_max_in_flight: 8\n"), Default())
	require.ErrorContains(t, err, "site.forward_max_in_flight (line 3): 8 is under site.forward_parallelism (16)")
	cfg, err := Parse(strings.NewReader("site:\n  forward_max_in_flight: 8\n"), Default())
	require.NoError(t, err, "a fixed count of 8")
	require.Equal(t, 8, cfg.Site.ForwardMaxInFlight)
}
