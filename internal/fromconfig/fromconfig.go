// Package fromconfig is where the YAML config (package config) meets the
// engines: one function per engine translates the file's section into the
// engine's own options, so no engine imports package config. The CLI calls
// these after loading the file; test harnesses (bench, e2e) call them on
// config.Default. The site SDK's translation is in internal/siteconfig,
// which the SDK imports itself.
package fromconfig

import (
	"errors"
	"fmt"
	"os"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/outbox"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/tracing"
	"github.com/outpost-dev/outpost/notification"
	"github.com/outpost-dev/outpost/workers"
)

// SiteDaemon is the site daemon's options from the file's site section.
func SiteDaemon(s config.Site) sitedaemon.Options {
	return sitedaemon.Options{
		ID: s.ID, Node: s.Node, Region: contract.Region{Name: s.Region, OwnQueue: s.RegionQueue}, Store: s.Store, CommitBatch: s.CommitBatch, CommitDelay: s.CommitDelay,
		Listen: s.Listen, APIHosts: s.APIHosts, APITokens: s.APITokens, TLSCertFile: s.TLSCertFile, TLSKeyFile: s.TLSKeyFile,
		MetricsNeedToken: s.MetricsNeedToken, RedactFields: s.RedactFields, HideSubject: s.WorkflowSummary == config.SummaryListOnly,
		ForwardInterval: s.ForwardInterval, ForwardBatch: s.ForwardBatch, ForwardParallelism: s.ForwardParallelism,
		ForwardMaxInFlight: s.ForwardMaxInFlight, PollInterval: s.PollInterval, MaxBodyBytes: s.MaxBodyBytes,
		TrackingRetention: s.TrackingRetention, PurgeInterval: s.PurgeInterval,
		TelemetryBatch: s.TelemetryBatch, TelemetryDelay: s.TelemetryDelay, ReconcileInterval: s.ReconcileInterval,
		PollerCheckInterval: s.PollerCheckInterval, HolderGrace: s.HolderGrace,
		Peer: sitedaemon.PeerOptions{Address: s.Peer.Address, SecretEnv: s.Peer.SecretEnv, Prefer: s.Peer.Prefer, CAFile: s.Peer.CAFile,
			Sync: s.Replication == config.ReplicationSync, FailoverAfter: s.FailoverAfter},
		ExternalSystems: s.ExternalSystems, Databases: s.Databases,
	}
}

// Tracing is a process's tracing options from the file's telemetry section.
func Tracing(t config.Telemetry) tracing.Options {
	return tracing.Options{Endpoint: t.OTLPEndpoint}
}

// Central is the central worker's options from the file's central section
// and temporal's namespace and encryption keys. It reads the secrets the
// file names (SMTP and store passwords, session key, encryption keys).
func Central(c config.Central, t config.Temporal) (workers.CentralOptions, error) {
	mail, err := Mailer(c.SMTP)
	if err != nil {
		return workers.CentralOptions{}, err
	}
	store, err := CentralStore(c.Store)
	if err != nil {
		return workers.CentralOptions{}, err
	}
	auth, err := pageAuth(c.PageAuth)
	if err != nil {
		return workers.CentralOptions{}, err
	}
	opts := workers.CentralOptions{
		Store: store, Mailer: mail, MailRetryInterval: c.SMTP.RetryInterval, MailMaxRetries: c.SMTP.MaxRetries,
		Listen: c.Listen, TemporalUIURL: c.TemporalUIURL, Namespace: t.Namespace, StuckAge: c.StuckAge,
		Retention: activities.Retention(c.Retention), Lists: c.Lists, PageAuth: auth, CodecOrigins: c.CodecOriginList(),
		PageHosts: c.PageHosts, Region: contract.Region{Name: c.Region, OwnQueue: c.RegionQueue},
	}
	if len(t.EncryptionKeys) > 0 { // a nil *AESGCM in the interface would not read as "no codec"
		if opts.Codec, err = PayloadCodec(t.EncryptionKeys); err != nil {
			return workers.CentralOptions{}, err
		}
	}
	return opts, nil
}

// CentralStore is which central store central.store names, a database
// server's DSN with its password from the variable the file names.
func CentralStore(s config.CentralStore) (workers.StoreOptions, error) {
	opts := workers.StoreOptions{Driver: s.Driver, Path: s.Path}
	if s.Driver == config.DriverSQLServer || s.Driver == config.DriverPostgres {
		dsn, err := s.DSNWithPassword()
		if err != nil {
			return workers.StoreOptions{}, err
		}
		opts.DSN = dsn
	}
	return opts, nil
}

// smtpTLSModes translates central.smtp.tls into the mailer's modes.
var smtpTLSModes = map[string]string{
	config.SMTPTLSNone:          notification.TLSNone,
	config.SMTPTLSOpportunistic: notification.TLSOpportunistic,
	config.SMTPTLSStartTLS:      notification.TLSStartTLS,
	config.SMTPTLSImplicit:      notification.TLSImplicit,
}

// Mailer is the mailer of central.smtp, its password read from the
// variable central.smtp.password_env names.
func Mailer(s config.SMTP) (notification.MailerConfig, error) {
	tls, ok := smtpTLSModes[s.TLS]
	if !ok {
		return notification.MailerConfig{}, fmt.Errorf("central.smtp.tls %q: want none, opportunistic, starttls or tls", s.TLS)
	}
	return notification.MailerConfig{
		Host: s.Host, Port: s.Port, Username: s.Username, Password: os.Getenv(s.PasswordEnv),
		From: s.From, TLS: tls, Timeout: s.Timeout, FinalReplyTimeout: s.FinalReplyTimeout,
	}, nil
}

// pageAuth reads central.page_auth.
func pageAuth(cfg config.PageAuth) (outbox.Auth, error) {
	auth := outbox.Auth{ProxyHeader: cfg.ProxyHeader, ProxyOperators: cfg.ProxyOperators, SessionTTL: cfg.SessionTTL}
	for _, p := range cfg.TrustedProxies {
		prefix, err := config.ParseTrustedProxy(p)
		if err != nil {
			return auth, fmt.Errorf("central.page_auth.trusted_proxies: %w", err)
		}
		auth.TrustedProxies = append(auth.TrustedProxies, prefix)
	}
	if cfg.ProxyHeader != "" && len(auth.TrustedProxies) == 0 {
		return auth, errors.New("central.page_auth.trusted_proxies: name the proxy's addresses: proxy_header is trusted only from them")
	}
	if len(cfg.Users) > 0 {
		auth.Users = make(map[string]outbox.User, len(cfg.Users))
		for name, u := range cfg.Users {
			auth.Users[name] = outbox.User{PasswordHash: u.PasswordHash, Role: outbox.Role(u.Role), Regions: u.Regions}
		}
	}
	if cfg.SessionKeyEnv != "" {
		key := os.Getenv(cfg.SessionKeyEnv)
		if len(key) < 32 {
			return auth, fmt.Errorf("central.page_auth.session_key_env: $%s must hold at least 32 characters", cfg.SessionKeyEnv)
		}
		auth.SessionKey = []byte(key)
	}
	return auth, nil
}
