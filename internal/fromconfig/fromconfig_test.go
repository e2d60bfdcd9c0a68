package fromconfig

import (
	"context"
	"encoding/base64"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/pgserver"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/notification"
	"github.com/outpost-dev/outpost/workers"
)

// Every field of the site section reaches the daemon's options.
func TestSiteDaemonCarriesEveryField(t *testing.T) {
	t.Parallel()
	var s config.Site
	testutil.FillDistinct(&s)
	s.WorkflowSummary = config.SummaryListOnly
	s.Replication = config.ReplicationSync
	opts := SiteDaemon(s)
	testutil.RequireCarried(t, s, opts, config.SummaryListOnly, config.ReplicationSync) // list-only becomes HideSubject, sync Peer.Sync
	require.True(t, opts.HideSubject)
	require.True(t, opts.Peer.Sync)
	require.False(t, SiteDaemon(config.Default().Site).HideSubject)
	require.False(t, SiteDaemon(config.Default().Site).Peer.Sync)
}

// Every field of the telemetry section reaches the tracing options.
func TestTracingCarriesEveryField(t *testing.T) {
	t.Parallel()
	var c config.Telemetry
	testutil.FillDistinct(&c)
	testutil.RequireCarried(t, c, Tracing(c))
}

// Every field of the central section, and temporal's namespace and keys,
// reaches the central worker's options.
func TestCentralCarriesEveryField(t *testing.T) {
	var c config.Central
	testutil.FillDistinct(&c)
	// Values the translation parses or looks up must be valid.
	c.SMTP.TLS = config.SMTPTLSImplicit
	c.Store.Driver, c.Store.DSN = config.DriverSQLServer, "sqlserver://outpost@db:1433"
	c.PageAuth.TrustedProxies = []string{"10.0.0.1"}
	t.Setenv(c.SMTP.PasswordEnv, "smtp-password")
	t.Setenv(c.Store.PasswordEnv, "db-password")
	t.Setenv(c.PageAuth.SessionKeyEnv, strings.Repeat("k", 32))
	t.Setenv("OUTPOST_TEST_KEY", base64.StdEncoding.EncodeToString(make([]byte, 32)))
	tcfg := config.Temporal{Namespace: "ns", EncryptionKeys: []config.EncryptionKey{{ID: "k1", Env: "OUTPOST_TEST_KEY"}}}

	opts, err := Central(c, tcfg)
	require.NoError(t, err)
	testutil.RequireCarried(t, c, opts,
		c.SMTP.TLS, c.Store.DSN, "10.0.0.1", // parsed: checked below
		c.SMTP.PasswordEnv, c.Store.PasswordEnv, c.PageAuth.SessionKeyEnv) // names of secrets: their values are carried
	require.Equal(t, notification.TLSImplicit, opts.Mailer.TLS)
	require.Equal(t, "smtp-password", opts.Mailer.Password)
	require.Equal(t, "sqlserver://outpost:db-password@db:1433", opts.Store.DSN)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")}, opts.PageAuth.TrustedProxies)
	require.Equal(t, strings.Repeat("k", 32), string(opts.PageAuth.SessionKey))
	require.Equal(t, "ns", opts.Namespace)
	require.NotNil(t, opts.Codec)
}

// A postgres central store in the config opens on PostgreSQL, the password
// read from the variable password_env names.
func TestCentralStoreOpensOnPostgres(t *testing.T) {
	srv := pgserver.StartForTest(t)
	ctx := context.Background()
	require.NoError(t, srv.CreateDatabase(ctx, "central"))
	dsn := &url.URL{Scheme: "postgres", User: url.User(srv.User), Host: net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)),
		Path: "/central", RawQuery: "sslmode=disable"}
	t.Setenv("OUTPOST_TEST_PG_PASSWORD", srv.Password)
	cfg, err := config.Parse(strings.NewReader("central:\n  store:\n    driver: postgres\n    dsn: "+dsn.String()+
		"\n    password_env: OUTPOST_TEST_PG_PASSWORD\n"), config.Default())
	require.NoError(t, err)

	opts, err := CentralStore(cfg.Central.Store)
	require.NoError(t, err)
	store, err := workers.OpenCentralStore(ctx, opts)
	require.NoError(t, err)
	defer store.Close()
	require.NoError(t, store.Ping(ctx))
	_, err = store.DB().ExecContext(ctx, "SELECT count(*) FROM notifications")
	require.NoError(t, err, "the store's tables are on PostgreSQL")
}

// No encryption keys: no codec (not a nil pointer in the interface).
func TestCentralWithoutKeysHasNoCodec(t *testing.T) {
	t.Parallel()
	opts, err := Central(config.Default().Central, config.Default().Temporal)
	require.NoError(t, err)
	require.Nil(t, opts.Codec)
}
