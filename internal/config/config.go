// Package config reads Outpost's one YAML file. Every field has a default
// (see Default and dev/outpost.example.yaml); secrets never live in the file,
// only the names of the environment variables that hold them.
package config

import (
	"github.com/outpost-dev/outpost/internal/httpserve"
	"github.com/outpost-dev/outpost/internal/targets"

	"crypto/x509"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"time"
)

// Config is the whole file.
type Config struct {
	Temporal Temporal `yaml:"temporal"`
	Site     Site     `yaml:"site"`
	Central  Central  `yaml:"central"`
	Dev      Dev      `yaml:"dev"`
	Log      Log      `yaml:"log"`
	// Telemetry exports traces to the operators' OpenTelemetry collector.
	Telemetry Telemetry `yaml:"telemetry"`
}

// Telemetry configures tracing of central and site processes.
type Telemetry struct {
	// OTLPEndpoint is an OpenTelemetry collector's OTLP/gRPC receiver,
	// http://host:port (plain) or https://host:port (TLS), where every
	// process sends its spans: one trace from a site API call through the
	// hand-off and the workflow to each delivery attempt. Default empty:
	// no tracing, at no cost.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
}

// Temporal is how every process reaches the Temporal cluster.
type Temporal struct {
	// Address is the frontend host:port. Default 127.0.0.1:7233.
	Address string `yaml:"address"`
	// Namespace. Default "default".
	Namespace string `yaml:"namespace"`
	// TLS turns on TLS to the frontend. Default false; implied by an API
	// key or any tls_* file.
	TLS bool `yaml:"tls"`
	// TLSCertFile and TLSKeyFile are the client certificate and key for
	// mutual TLS (PEM; reread at every new connection, so a renewed
	// certificate needs no restart). Default empty.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// TLSCAFile is the CA (PEM) that signed the frontend's certificate.
	// Default empty: the system's roots.
	TLSCAFile string `yaml:"tls_ca_file"`
	// TLSServerName is the name the frontend's certificate must carry when
	// it is not the host of address. Default empty: that host.
	TLSServerName string `yaml:"tls_server_name"`
	// APIKeyEnv names the environment variable holding a Temporal Cloud API
	// key. Default OUTPOST_TEMPORAL_API_KEY; unset or empty variable: no key.
	APIKeyEnv string `yaml:"api_key_env"`
	// EncryptionKeys encrypt every payload Outpost writes to Temporal
	// (AES-256-GCM): the first encrypts, all decrypt, so a new key goes
	// first and the old one stays until its histories are gone. Every
	// process (central, site, CLI) needs the same keys. Default none:
	// payloads are plain JSON in the history.
	EncryptionKeys []EncryptionKey `yaml:"encryption_keys"`
}

// EncryptionKey is one payload key: the base64 of 32 random bytes, read
// from a file or an environment variable, never written in the config.
type EncryptionKey struct {
	// ID names the key in every payload it encrypts. Required.
	ID string `yaml:"id"`
	// File holds the key. One of File and Env is required.
	File string `yaml:"file"`
	// Env names the variable holding the key.
	Env string `yaml:"env"`
}

// Secret reads the key's text from its file or variable.
func (k EncryptionKey) Secret() (string, error) {
	switch {
	case k.File != "":
		b, err := os.ReadFile(k.File)
		if err != nil {
			return "", fmt.Errorf("encryption key %q: %w", k.ID, err)
		}
		return string(b), nil
	case os.Getenv(k.Env) != "":
		return os.Getenv(k.Env), nil
	}
	return "", fmt.Errorf("encryption key %q: $%s is not set", k.ID, k.Env)
}

// Site configures the site daemon and SDK.
type Site struct {
	// ID names the site in workflow search attributes and its task queue
	// (letters, digits, '.', '_', '-'). Default "site-1".
	ID string `yaml:"id"`
	// Node names this node of the site (provenance, HLC chain). Default "node-a".
	Node string `yaml:"node"`
	// Region names the region whose central workers own this site's work
	// (1-63 lower-case letters, digits and '-'): its notifications, calls
	// and telemetry go to that region's central, and every workflow it
	// starts carries it as OutpostRegion. temporal.namespace is then the
	// region's namespace, or, with RegionQueue, a namespace regions share.
	// Default none: outpost-central in temporal.namespace, as without
	// regions.
	Region string `yaml:"region"`
	// RegionQueue hands the region's work to task queue
	// outpost-central-<region> in a namespace regions share, instead of
	// outpost-central in the region's own namespace. Needs Region; must
	// match the region's central.region_queue. Default false.
	RegionQueue bool `yaml:"region_queue"`
	// Store is the site SQLite file. Default "outpost-site.db".
	Store string `yaml:"store"`
	// Listen is the local HTTP API address. Default 127.0.0.1:8480.
	Listen string `yaml:"listen"`
	// APIHosts are host names, beside localhost and IP addresses, under
	// which clients reach the API; a request whose Host header is another
	// name is refused (a DNS-rebinding page's is). Default none.
	APIHosts []string `yaml:"api_hosts"`
	// APITokens names the bearer tokens the site API accepts: who holds one
	// ("scripts", "scada") → the environment variable holding it. Several
	// let one be rotated while another still works. Each operation's audit
	// trail names the holder of the token it came with. Required when
	// listen is not a loopback address; on loopback too in production
	// (`outpost site` warns without: any local process could use the API).
	// Default none.
	APITokens map[string]string `yaml:"api_tokens"`
	// TLSCertFile and TLSKeyFile serve the API (and /metrics, /healthz,
	// /readyz) over HTTPS; both or neither. The files are reread when they
	// change, so a renewed certificate needs no restart. Default none: HTTP.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// MetricsNeedToken makes /metrics ask for a token too (/healthz and
	// /readyz never do). Default false.
	MetricsNeedToken bool `yaml:"metrics_need_token"`
	// RedactFields are call params whose values GET /v1/operations/{id}
	// never shows, matched without regard to case at any depth, beside
	// password, secret, token, apikey, api_key and authorization, which are
	// always hidden. Default none.
	RedactFields []string `yaml:"redact_fields"`
	// WorkflowSummary is what a notification's workflow summary in the Web
	// UI says: "full" (list and subject) or "list-only". Everyone with Web
	// UI access reads summaries (in plain text unless
	// temporal.encryption_keys is set). Default full.
	WorkflowSummary string `yaml:"workflow_summary"`
	// ForwardInterval is the fixed wait before a failed hand-off to central is
	// tried again, forever. Default 10s.
	ForwardInterval time.Duration `yaml:"forward_interval"`
	// ForwardBatch is how many buffered rows one forwarder pass reads. Default 100.
	ForwardBatch int `yaml:"forward_batch"`
	// ForwardParallelism is how many hand-offs run at once at first, and
	// the fewest while they succeed: the forwarder keeps more in flight
	// while the round trip to central stays near its least, up to
	// ForwardMaxInFlight. Default 8.
	ForwardParallelism int `yaml:"forward_parallelism"`
	// ForwardMaxInFlight is the most hand-offs in flight at once over a
	// long link (each is a request central's frontend holds), at least
	// ForwardParallelism. Default 256.
	ForwardMaxInFlight int `yaml:"forward_max_in_flight"`
	// PollInterval is how often the forwarder looks for rows written by
	// another process (an SDK script). Default 250ms.
	PollInterval time.Duration `yaml:"poll_interval"`
	// MaxBodyBytes limits a notification body. Default 65536 (64 KiB), at
	// most contract.MaxBodyBytesLimit (256 KiB).
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// CommitBatch is the most operations one group commit of the site store
	// holds: concurrent enqueues share one transaction and one fsync. Default 256.
	CommitBatch int `yaml:"commit_batch"`
	// CommitDelay is the longest an enqueue waits for others to share its
	// commit, and only while several callers are active. Default 2ms.
	CommitDelay time.Duration `yaml:"commit_delay"`
	// TrackingRetention is how long terminal tracking rows (Delivered,
	// Failed, Discarded) stay on the site before it purges them (a row
	// central has not received yet waits for it). The same retention keeps
	// job-log entries an air-gap receipt settled (entries handed off online
	// go at the next purge) and idempotency keys whose operation has left
	// the site. Default 168h (7 days).
	TrackingRetention time.Duration `yaml:"tracking_retention"`
	// PurgeInterval is how often the site looks for tracking rows, job-log
	// entries and idempotency keys to purge. Default 1h.
	PurgeInterval time.Duration `yaml:"purge_interval"`
	// TelemetryBatch is the most tracking changes sent to central in one
	// batch (and at most 1 MiB of them); a full batch is sent at once.
	// Default 1000.
	TelemetryBatch int `yaml:"telemetry_batch"`
	// TelemetryDelay is the longest a tracking change waits for its batch to
	// fill before it is sent anyway. Default 2s.
	TelemetryDelay time.Duration `yaml:"telemetry_delay"`
	// ReconcileInterval is how often central pulls this site's tracking
	// changes to heal anything telemetry missed (a Temporal Schedule
	// reconcile/<id> the daemon creates). Default 5m.
	ReconcileInterval time.Duration `yaml:"reconcile_interval"`
	// PollerCheckInterval is how often the daemon looks for another daemon
	// polling its task queue (the same site id twice), reported in the log
	// and as outpost_site_other_pollers. Default 30s.
	PollerCheckInterval time.Duration `yaml:"poller_check_interval"`
	// HolderGrace is how long another daemon's poller must have shown no
	// activity before a waiting daemon takes the site over from it. It must
	// be longer than a minute (Temporal's long poll: an idle poller shows
	// activity that often) plus PollerCheckInterval. Default 2m.
	HolderGrace time.Duration `yaml:"holder_grace"`
	// Peer makes this node one of an active/standby pair: the other node's
	// API address and the secret they share. Default none: one node.
	Peer Peer `yaml:"peer"`
	// Replication is what an enqueue waits for in a pair: "async" (its own
	// commit; the standby follows within milliseconds) or "sync" (the
	// standby has applied it too, while the standby follows). Default async.
	Replication string `yaml:"replication"`
	// FailoverAfter is how long the active node of a pair may be silent
	// before the standby takes over. Default 5s.
	FailoverAfter time.Duration `yaml:"failover_after"`
	// ExternalSystems maps a name to an HTTP system scripts call with Call.
	// Default: none.
	ExternalSystems map[string]ExternalSystem `yaml:"external_systems"`
	// Databases maps a name to a database scripts write to with Write.
	// Default: none.
	Databases map[string]Database `yaml:"databases"`
}

// Peer is the other node of an active/standby pair.
type Peer struct {
	// Address is the other node's site API, as this node reaches it, e.g.
	// http://10.0.0.12:8480 or https://plant-b.local:8480. Default none.
	Address string `yaml:"address"`
	// SecretEnv names the environment variable holding the secret both
	// nodes share; every request between them carries it. Required with address.
	SecretEnv string `yaml:"secret_env"`
	// Prefer makes this node the active one when both nodes start (set it
	// on one node). Default false.
	Prefer bool `yaml:"prefer"`
	// CAFile is the CA that signed the other node's certificate, for an
	// https address it does not find in the system's roots. Default none.
	CAFile string `yaml:"ca_file"`
}

// Replication modes of a pair.
const (
	ReplicationAsync = "async"
	ReplicationSync  = "sync"
)

// The site's target definitions are package targets' own, with their yaml
// tags and the defaults an entry's left-out fields take; the file's
// external_systems and databases are read straight into them.
type (
	ExternalSystem = targets.ExternalSystem
	Method         = targets.Method
	Database       = targets.Database
)

// SMTP TLS modes (central.smtp.tls).
const (
	SMTPTLSNone          = "none"          // plain SMTP (a local relay or the dev sink)
	SMTPTLSOpportunistic = "opportunistic" // STARTTLS when offered
	SMTPTLSStartTLS      = "starttls"      // STARTTLS required
	SMTPTLSImplicit      = "tls"           // TLS from the first byte (port 465)
)

// Workflow summary modes (site.workflow_summary).
const (
	SummaryFull     = "full"
	SummaryListOnly = "list-only"
)

// IsLoopback reports whether a listen address (host:port) is reachable
// from this host only; `config check` asks it the way the servers do
// (httpserve.IsLoopback).
func IsLoopback(listen string) bool { return httpserve.IsLoopback(listen) }

// DefaultExternalSystem is an external system entry with only the defaults
// (targets.DefaultExternalSystem).
func DefaultExternalSystem() ExternalSystem { return targets.DefaultExternalSystem() }

// DefaultDatabase is a database entry with only the defaults
// (targets.DefaultDatabase).
func DefaultDatabase() Database { return targets.DefaultDatabase() }

// Central configures the central worker.
type Central struct {
	Store CentralStore `yaml:"store"`
	SMTP  SMTP         `yaml:"smtp"`
	// Region names the one region this central process serves: its worker
	// polls only that region's task queue and refuses a workflow of
	// another region (OutpostRegion), and its purge schedule is the
	// region's own (outpost-purge-<region>). Default none: outpost-central,
	// as without regions.
	Region string `yaml:"region"`
	// RegionQueue polls task queue outpost-central-<region> in a namespace
	// regions share, instead of outpost-central in the region's own
	// namespace (temporal.namespace). Needs Region. Default false.
	RegionQueue bool `yaml:"region_queue"`
	// Listen is where the central worker serves its outbox page, /metrics,
	// /healthz and /readyz. Default 127.0.0.1:8481.
	Listen string `yaml:"listen"`
	// TemporalUIURL is the Temporal Web UI the outbox page links each item
	// to. Default http://127.0.0.1:8233.
	TemporalUIURL string `yaml:"temporal_ui_url"`
	// StuckAge is how old a non-terminal operation must be to count as
	// stuck in the KPIs and on the outbox page. Default 10m.
	StuckAge time.Duration `yaml:"stuck_age"`
	// Retention is how long terminal rows are kept before PurgeWorkflow
	// (a daily Temporal Schedule) deletes them.
	Retention Retention `yaml:"retention"`
	// Lists maps a notification list name to its recipient addresses,
	// resolved at delivery time. Default: none.
	Lists map[string][]string `yaml:"lists"`
	// PageAuth says who may use the outbox page and its codec server.
	// Default: nobody is asked, which central allows on loopback only.
	PageAuth PageAuth `yaml:"page_auth"`
	// CodecOrigins are the browser origins allowed to call the codec server
	// (/codec/decode) with the page's sign-in. Default: the origin of
	// temporal_ui_url.
	CodecOrigins []string `yaml:"codec_origins"`
	// PageHosts are host names, beside localhost, IP addresses and the
	// host of listen, under which people and the Web UI reach the page; a
	// request whose Host header is another name is refused with 421 (a
	// DNS-rebinding page's is). Default none.
	PageHosts []string `yaml:"page_hosts"`
}

// PageAuth configures sign-in to the outbox page: users with passwords,
// an authenticating proxy, or both.
type PageAuth struct {
	// Users sign in on the page's form: name → bcrypt hash and role.
	// Default: none.
	Users map[string]PageUser `yaml:"users"`
	// ProxyHeader names the header an authenticating proxy sets to the
	// signed-in user (oauth2-proxy: X-Forwarded-User). Read only on
	// requests from TrustedProxies. Default empty: no proxy.
	ProxyHeader string `yaml:"proxy_header"`
	// TrustedProxies are the proxy's addresses, as IPs or CIDR prefixes.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ProxyOperators are the proxy's users who may retry and discard; the
	// proxy's other users only see. Default: none.
	ProxyOperators []string `yaml:"proxy_operators"`
	// SessionKeyEnv names a variable holding a key (any text, 32+
	// characters) that signs session cookies, shared by every central
	// worker behind one address. Default empty: a random key per process,
	// so signing in again after a restart.
	SessionKeyEnv string `yaml:"session_key_env"`
	// SessionTTL is how long a sign-in lasts. Default 12h.
	SessionTTL time.Duration `yaml:"session_ttl"`
}

// CodecOriginList is CodecOrigins, or the origin of TemporalUIURL.
func (c Central) CodecOriginList() []string {
	if len(c.CodecOrigins) > 0 {
		return c.CodecOrigins
	}
	u, err := url.Parse(c.TemporalUIURL)
	if err != nil || u.Host == "" {
		return nil
	}
	return []string{u.Scheme + "://" + u.Host}
}

// Enabled reports whether the page asks who is there.
func (a PageAuth) Enabled() bool { return len(a.Users) > 0 || a.ProxyHeader != "" }

// ParseTrustedProxy reads a trusted proxy address: an IP or a CIDR prefix.
func ParseTrustedProxy(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or a CIDR prefix like 10.0.0.0/8", s)
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
}

// PageUser is one person who signs in to the outbox page.
type PageUser struct {
	// PasswordHash is the bcrypt hash of the password; make one with
	// `outpost central hash-password`.
	PasswordHash string `yaml:"password_hash"`
	// Role is operator (may retry and discard) or viewer (sees only).
	Role string `yaml:"role"`
	// Regions limits the user to the pages of centrals serving one of these
	// regions (central.region): on another region's page they are refused,
	// and so cannot see, retry or discard its work. One page_auth can then
	// serve every region's central. Default none: every region.
	Regions []string `yaml:"regions"`
}

// Retention is how long central keeps terminal rows. Non-terminal rows are
// never purged.
type Retention struct {
	// Notifications (Delivered, Discarded). Default 8760h (365 days).
	Notifications time.Duration `yaml:"notifications"`
	// SiteCalls is the site_calls mirror (Delivered, Failed, Discarded).
	// Default 2160h (90 days).
	SiteCalls time.Duration `yaml:"site_calls"`
	// AuditLog is every audit_log row, by its time: a row holds one
	// change's events and goes with its last. Default 8760h (365 days).
	AuditLog time.Duration `yaml:"audit_log"`
	// PurgeBatch bounds the rows one purge transaction deletes. Default 1000.
	PurgeBatch int `yaml:"purge_batch"`
}

// Central store drivers.
const (
	DriverSQLite    = "sqlite"
	DriverSQLServer = "sqlserver"
	DriverPostgres  = "postgres"
)

// CentralStore is central's database.
type CentralStore struct {
	// Driver is "sqlite", "sqlserver" or "postgres". Default "sqlite".
	Driver string `yaml:"driver"`
	// Path is the SQLite file (driver sqlite). Default "outpost-central.db".
	Path string `yaml:"path"`
	// DSN is the database's URL without its password:
	// sqlserver://outpost@db:1433?database=outpost (driver sqlserver) or
	// postgres://outpost@db:5432/outpost (driver postgres). Default empty.
	DSN string `yaml:"dsn"`
	// PasswordEnv names the variable holding the database's password.
	// Default OUTPOST_DB_PASSWORD.
	PasswordEnv string `yaml:"password_env"`
}

// SMTP is the mail server central delivers through, and its retry policy.
type SMTP struct {
	// Host. Default 127.0.0.1.
	Host string `yaml:"host"`
	// Port. Default 25.
	Port int `yaml:"port"`
	// Username; empty means no authentication. Default empty.
	Username string `yaml:"username"`
	// PasswordEnv names the variable holding the SMTP password. Default OUTPOST_SMTP_PASSWORD.
	PasswordEnv string `yaml:"password_env"`
	// From is the sender address. Default outpost@localhost.
	From string `yaml:"from"`
	// TLS is none, opportunistic, starttls or tls. Default starttls.
	TLS string `yaml:"tls"`
	// Timeout bounds connecting to the server and then the commands up to
	// the end of the message, each. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// FinalReplyTimeout is how long the server may take to confirm a message
	// it has received in full. A relay that answers after this is taken for
	// one that may have accepted: the notification parks as uncertain rather
	// than being sent again. RFC 5321 recommends 10m. Default 5m.
	FinalReplyTimeout time.Duration `yaml:"final_reply_timeout"`
	// RetryInterval is the fixed wait between delivery attempts. Default 1m.
	RetryInterval time.Duration `yaml:"retry_interval"`
	// MaxRetries is how many retries follow a failed first attempt before the
	// notification parks. Default 10.
	MaxRetries int `yaml:"max_retries"`
}

// Dev configures `outpost dev`.
type Dev struct {
	// DataDir holds the Temporal dev server's database (temporal.db). The
	// stores are where site.store, central.store.path and dev.demo_database
	// say (under .outpost-dev in the dev defaults); `outpost dev` creates
	// their folders. Default .outpost-dev.
	DataDir string `yaml:"data_dir"`
	// StartTemporal starts the pinned Temporal dev server at temporal.address;
	// false uses an existing server there. Default true.
	StartTemporal bool `yaml:"start_temporal"`
	// TemporalUIPort is the dev server's Web UI port; 0: temporal.address's
	// port + 1000, so stacks on different addresses do not collide (its
	// HTTP API and metrics take the port + 1 and + 2). Default 0 (8233).
	TemporalUIPort int `yaml:"temporal_ui_port"`
	// SMTPSink starts an in-process SMTP server at central.smtp.host:port that
	// keeps what it receives; false delivers to the configured server. Default true.
	SMTPSink bool `yaml:"smtp_sink"`
	// SinkHTTP is where the sink shows what it received. Default 127.0.0.1:8025.
	SinkHTTP string `yaml:"sink_http"`
	// DemoSystem is where the demo external system listens (an HTTP API
	// that can be told to fail); empty: none. Default 127.0.0.1:8090.
	DemoSystem string `yaml:"demo_system"`
	// DemoDatabase is a SQLite file `outpost dev` creates, with a table
	// readings (tag, value, at), for cached writes; empty: none.
	// Default .outpost-dev/historian.db.
	DemoDatabase string `yaml:"demo_database"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is console or json. Default console.
	Format string `yaml:"format"`
}

// Default returns a Config with every default filled in.
func Default() Config {
	return Config{
		Temporal: Temporal{Address: "127.0.0.1:7233", Namespace: "default", APIKeyEnv: "OUTPOST_TEMPORAL_API_KEY"},
		Site: Site{
			ID: "site-1", Node: "node-a", Store: "outpost-site.db", Listen: "127.0.0.1:8480", WorkflowSummary: SummaryFull,
			ForwardInterval: 10 * time.Second, ForwardBatch: 100, ForwardParallelism: 8, ForwardMaxInFlight: 256,
			PollInterval: 250 * time.Millisecond, MaxBodyBytes: 64 << 10,
			CommitBatch: 256, CommitDelay: 2 * time.Millisecond,
			TrackingRetention: 7 * 24 * time.Hour, PurgeInterval: time.Hour,
			TelemetryBatch: 1000, TelemetryDelay: 2 * time.Second, ReconcileInterval: 5 * time.Minute,
			PollerCheckInterval: 30 * time.Second, HolderGrace: 2 * time.Minute,
			Replication: ReplicationAsync, FailoverAfter: 5 * time.Second,
		},
		Central: Central{
			Listen: "127.0.0.1:8481", TemporalUIURL: "http://127.0.0.1:8233", StuckAge: 10 * time.Minute,
			PageAuth:  PageAuth{SessionTTL: 12 * time.Hour},
			Retention: Retention{Notifications: 365 * 24 * time.Hour, SiteCalls: 90 * 24 * time.Hour, AuditLog: 365 * 24 * time.Hour, PurgeBatch: 1000},
			Store:     CentralStore{Driver: DriverSQLite, Path: "outpost-central.db", PasswordEnv: "OUTPOST_DB_PASSWORD"},
			SMTP: SMTP{
				Host: "127.0.0.1", Port: 25, PasswordEnv: "OUTPOST_SMTP_PASSWORD", From: "outpost@localhost",
				TLS: SMTPTLSStartTLS, Timeout: 30 * time.Second, FinalReplyTimeout: 5 * time.Minute,
				RetryInterval: time.Minute, MaxRetries: 10,
			},
		},
		Dev: Dev{
			DataDir: ".outpost-dev", StartTemporal: true, SMTPSink: true, SinkHTTP: "127.0.0.1:8025",
			DemoSystem: "127.0.0.1:8090", DemoDatabase: ".outpost-dev/historian.db",
		},
		Log: Log{Level: "info", Format: "console"},
	}
}

// DevDefault is what `outpost dev` runs without a config file: everything
// under .outpost-dev, central mailing the in-process SMTP sink on port 2525,
// the demo external system "demo" and database "historian", and short retry
// intervals so a demo shows Retrying and Parked quickly.
func DevDefault() Config {
	cfg := Default()
	cfg.Site.ID = "plant-1"
	cfg.Site.Store = ".outpost-dev/site.db"
	cfg.Site.ForwardInterval = 5 * time.Second
	cfg.Central.Store.Path = ".outpost-dev/central.db"
	cfg.Central.SMTP.Port = 2525
	cfg.Central.SMTP.TLS = SMTPTLSNone
	cfg.Central.SMTP.RetryInterval = 10 * time.Second
	cfg.Central.SMTP.MaxRetries = 3
	cfg.Central.Lists = map[string][]string{"ops": {"ops@example.com", "oncall@example.com"}}
	cfg.Site.TelemetryDelay = time.Second
	cfg.Site.ReconcileInterval = time.Minute
	demo := DefaultExternalSystem()
	demo.BaseURL, demo.Timeout, demo.MaxRetries, demo.RetryInterval = demoBaseURL(cfg.Dev.DemoSystem), 5*time.Second, 3, 10*time.Second
	demo.Methods = map[string]Method{
		"createOrder": {Verb: "POST", Path: "/orders"},
		"getOrder":    {Verb: "GET", Path: "/orders/{id}"},
	}
	cfg.Site.ExternalSystems = map[string]ExternalSystem{demoSystem: demo}
	historian := DefaultDatabase()
	historian.DSN, historian.Timeout, historian.MaxRetries, historian.RetryInterval = cfg.Dev.DemoDatabase, 5*time.Second, 3, 10*time.Second
	cfg.Site.Databases = map[string]Database{demoDatabase: historian}
	return cfg
}

// The names of the dev defaults' demo system and demo database entries.
const (
	demoSystem   = "demo"
	demoDatabase = "historian"
)

// demoBaseURL is the demo system's base_url when it listens at addr.
func demoBaseURL(addr string) string { return "http://" + addr + "/api" }

// Load reads and checks the file at path over base (Default or DevDefault).
func Load(path string, base Config) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	cfg, err := Parse(f, base)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse reads a config over base and checks it. The error, a Problems, lists
// every problem found.
func Parse(r io.Reader, base Config) (Config, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	return parse(data, base)
}

// DSNWithPassword is the configured DSN with the password from its variable.
func (s CentralStore) DSNWithPassword() (string, error) {
	dsn, err := dsnWithPassword(s.DSN, s.PasswordEnv)
	if err != nil {
		return "", fmt.Errorf("central.store.dsn: %w", err)
	}
	return dsn, nil
}

// dsnWithPassword puts the password from the variable passwordEnv into a
// sqlserver:// or postgres:// URL that names its user.
func dsnWithPassword(dsn, passwordEnv string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	if pw, ok := os.LookupEnv(passwordEnv); ok && passwordEnv != "" && u.User != nil {
		u.User = url.UserPassword(u.User.Username(), pw)
	}
	return u.String(), nil
}

// APIKey reads the Temporal API key from its environment variable.
func (t Temporal) APIKey() string { return os.Getenv(t.APIKeyEnv) }

// LoadCertPool reads the PEM certificates of a CA file.
func LoadCertPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// UsesTLS reports whether the connection to the frontend is TLS.
func (t Temporal) UsesTLS() bool {
	return t.TLS || t.APIKey() != "" || t.TLSCertFile != "" || t.TLSCAFile != "" || t.TLSServerName != ""
}
