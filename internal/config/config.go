// Package config reads Outpost's one YAML file. Every field has a default
// (see Default and dev/outpost.example.yaml); secrets never live in the file,
// only the names of the environment variables that hold them.
package config

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/outpost-dev/outpost/internal/mailer"
)

// Config is the whole file.
type Config struct {
	Temporal Temporal `yaml:"temporal"`
	Site     Site     `yaml:"site"`
	Central  Central  `yaml:"central"`
	Dev      Dev      `yaml:"dev"`
	Log      Log      `yaml:"log"`
}

// Temporal is how every process reaches the Temporal cluster.
type Temporal struct {
	// Address is the frontend host:port. Default 127.0.0.1:7233.
	Address string `yaml:"address"`
	// Namespace. Default "default".
	Namespace string `yaml:"namespace"`
	// TLS turns on TLS to the frontend. Default false; implied by an API key.
	TLS bool `yaml:"tls"`
	// APIKeyEnv names the environment variable holding a Temporal Cloud API
	// key. Default OUTPOST_TEMPORAL_API_KEY; unset or empty variable: no key.
	APIKeyEnv string `yaml:"api_key_env"`
}

// Site configures the site daemon and SDK.
type Site struct {
	// ID names the site in workflow search attributes and its task queue
	// (letters, digits, '.', '_', '-'). Default "site-1".
	ID string `yaml:"id"`
	// Node names this node of the site (provenance, HLC chain). Default "node-a".
	Node string `yaml:"node"`
	// Store is the site SQLite file. Default "outpost-site.db".
	Store string `yaml:"store"`
	// Listen is the local HTTP API address. Default 127.0.0.1:8480.
	Listen string `yaml:"listen"`
	// ForwardInterval is the fixed wait before a failed hand-off to central is
	// tried again, forever. Default 10s.
	ForwardInterval time.Duration `yaml:"forward_interval"`
	// ForwardBatch is how many buffered rows one forwarder pass reads. Default 100.
	ForwardBatch int `yaml:"forward_batch"`
	// ForwardParallelism is how many hand-offs run at once. Default 8.
	ForwardParallelism int `yaml:"forward_parallelism"`
	// PollInterval is how often the forwarder looks for rows written by
	// another process (an SDK script). Default 250ms.
	PollInterval time.Duration `yaml:"poll_interval"`
	// MaxBodyBytes limits a notification body. Default 65536 (64 KiB).
	MaxBodyBytes int `yaml:"max_body_bytes"`
}

// Central configures the central worker.
type Central struct {
	Store CentralStore `yaml:"store"`
	SMTP  SMTP         `yaml:"smtp"`
	// Lists maps a notification list name to its recipient addresses,
	// resolved at delivery time. Default: none.
	Lists map[string][]string `yaml:"lists"`
}

// Central store drivers.
const (
	DriverSQLite    = "sqlite"
	DriverSQLServer = "sqlserver"
)

// CentralStore is central's database.
type CentralStore struct {
	// Driver is "sqlite" or "sqlserver". Default "sqlite".
	Driver string `yaml:"driver"`
	// Path is the SQLite file (driver sqlite). Default "outpost-central.db".
	Path string `yaml:"path"`
	// DSN is the SQL Server URL without its password, e.g.
	// sqlserver://outpost@db:1433?database=outpost (driver sqlserver). Default empty.
	DSN string `yaml:"dsn"`
	// PasswordEnv names the variable holding the SQL Server password.
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
	// Timeout bounds one delivery attempt. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// RetryInterval is the fixed wait between delivery attempts. Default 1m.
	RetryInterval time.Duration `yaml:"retry_interval"`
	// MaxRetries is how many retries follow a failed first attempt before the
	// notification parks. Default 10.
	MaxRetries int `yaml:"max_retries"`
}

// Dev configures `outpost dev`.
type Dev struct {
	// DataDir holds the dev server's database and the stores. Default .outpost-dev.
	DataDir string `yaml:"data_dir"`
	// StartTemporal starts the pinned Temporal dev server at temporal.address;
	// false uses an existing server there. Default true.
	StartTemporal bool `yaml:"start_temporal"`
	// TemporalUIPort is the dev server's Web UI port. Default 8233.
	TemporalUIPort int `yaml:"temporal_ui_port"`
	// SMTPSink starts an in-process SMTP server at central.smtp.host:port that
	// keeps what it receives; false delivers to the configured server. Default true.
	SMTPSink bool `yaml:"smtp_sink"`
	// SinkHTTP is where the sink shows what it received. Default 127.0.0.1:8025.
	SinkHTTP string `yaml:"sink_http"`
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
			ID: "site-1", Node: "node-a", Store: "outpost-site.db", Listen: "127.0.0.1:8480",
			ForwardInterval: 10 * time.Second, ForwardBatch: 100, ForwardParallelism: 8,
			PollInterval: 250 * time.Millisecond, MaxBodyBytes: 64 << 10,
		},
		Central: Central{
			Store: CentralStore{Driver: DriverSQLite, Path: "outpost-central.db", PasswordEnv: "OUTPOST_DB_PASSWORD"},
			SMTP: SMTP{
				Host: "127.0.0.1", Port: 25, PasswordEnv: "OUTPOST_SMTP_PASSWORD", From: "outpost@localhost",
				TLS: mailer.TLSStartTLS, Timeout: 30 * time.Second, RetryInterval: time.Minute, MaxRetries: 10,
			},
		},
		Dev: Dev{DataDir: ".outpost-dev", StartTemporal: true, TemporalUIPort: 8233, SMTPSink: true, SinkHTTP: "127.0.0.1:8025"},
		Log: Log{Level: "info", Format: "console"},
	}
}

// DevDefault is what `outpost dev` runs without a config file: everything
// under .outpost-dev, central mailing the in-process SMTP sink on port 2525,
// and short retry intervals so a demo shows Retrying and Parked quickly.
func DevDefault() Config {
	cfg := Default()
	cfg.Site.ID = "plant-1"
	cfg.Site.Store = ".outpost-dev/site.db"
	cfg.Site.ForwardInterval = 5 * time.Second
	cfg.Central.Store.Path = ".outpost-dev/central.db"
	cfg.Central.SMTP.Port = 2525
	cfg.Central.SMTP.TLS = mailer.TLSNone
	cfg.Central.SMTP.RetryInterval = 10 * time.Second
	cfg.Central.SMTP.MaxRetries = 3
	cfg.Central.Lists = map[string][]string{"ops": {"ops@example.com", "oncall@example.com"}}
	return cfg
}

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

// SMTPPassword reads the SMTP password from its environment variable.
func (c Central) SMTPPassword() string { return os.Getenv(c.SMTP.PasswordEnv) }

// SQLServerDSN is the configured DSN with the password from its variable.
func (s CentralStore) SQLServerDSN() (string, error) {
	u, err := url.Parse(s.DSN)
	if err != nil {
		return "", fmt.Errorf("central.store.dsn: %w", err)
	}
	if pw, ok := os.LookupEnv(s.PasswordEnv); ok && u.User != nil {
		u.User = url.UserPassword(u.User.Username(), pw)
	}
	return u.String(), nil
}

// APIKey reads the Temporal API key from its environment variable.
func (t Temporal) APIKey() string { return os.Getenv(t.APIKeyEnv) }

// Mailer is the mailer configuration of the SMTP section.
func (c Central) Mailer() mailer.Config {
	return mailer.Config{
		Host: c.SMTP.Host, Port: c.SMTP.Port, Username: c.SMTP.Username, Password: c.SMTPPassword(),
		From: c.SMTP.From, TLS: c.SMTP.TLS, Timeout: c.SMTP.Timeout,
	}
}
