package sitedaemon

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/httpserve"
	"github.com/outpost-dev/outpost/internal/targets"
)

// Options configure the site daemon. The CLI translates the config file's
// site section into them (internal/cli); the names in parentheses are that
// section's keys.
type Options struct {
	// ID names the site in workflow search attributes and its task queue (id).
	ID string
	// Node names this node of the site (node).
	Node string
	// Region is the region whose central owns the site's work and how it
	// is routed (region, region_queue); the zero Region is none.
	Region contract.Region
	// Store is the site SQLite file (store), opened with CommitBatch and CommitDelay.
	Store       string
	CommitBatch int
	CommitDelay time.Duration
	// Listen is the local HTTP API address (listen).
	Listen string
	// APIHosts are host names, beside localhost and IP addresses, the API
	// answers to (api_hosts).
	APIHosts []string
	// APITokens names the bearer tokens the API accepts: holder → the
	// environment variable holding it (api_tokens), read at start.
	APITokens map[string]string
	// TLSCertFile and TLSKeyFile serve the API over HTTPS when set.
	TLSCertFile, TLSKeyFile string
	// MetricsNeedToken makes /metrics ask for a token too.
	MetricsNeedToken bool
	// RedactFields are call params the API never shows (redact_fields).
	RedactFields []string
	// HideSubject leaves a notification's subject out of its workflow
	// summary (workflow_summary: list-only).
	HideSubject bool
	// ForwardInterval, ForwardBatch, ForwardParallelism,
	// ForwardMaxInFlight and PollInterval drive the forwarder
	// (ForwarderOptions).
	ForwardInterval    time.Duration
	ForwardBatch       int
	ForwardParallelism int
	ForwardMaxInFlight int
	PollInterval       time.Duration
	// MaxBodyBytes limits a notification body.
	MaxBodyBytes int
	// TrackingRetention is how long terminal tracking rows stay, job-log
	// entries settled by an air-gap receipt stay, and idempotency keys are
	// remembered once their operation has left the site; the purge looks
	// for them every PurgeInterval.
	TrackingRetention time.Duration
	PurgeInterval     time.Duration
	// TelemetryBatch and TelemetryDelay drive telemetry (TelemetryOptions).
	TelemetryBatch int
	TelemetryDelay time.Duration
	// ReconcileInterval is how often central pulls this site's tracking changes.
	ReconcileInterval time.Duration
	// PollerCheckInterval is how often the daemon looks for another daemon
	// polling its task queue (poller_check_interval).
	PollerCheckInterval time.Duration
	// HolderGrace is how long the poller of the daemon holding the site
	// must show no activity before a waiting daemon takes over
	// (holder_grace); longer than the server's long poll plus
	// PollerCheckInterval.
	HolderGrace time.Duration
	// Peer makes this daemon one node of an active/standby pair when its
	// Address is set (peer, replication, failover_after; see pair.go).
	Peer PeerOptions
	// ExternalSystems and Databases are what cached calls and writes reach.
	ExternalSystems map[string]targets.ExternalSystem
	Databases       map[string]targets.Database
}

// PeerOptions configure a pair of nodes (site.peer, site.replication,
// site.failover_after).
type PeerOptions struct {
	// Address is the other node's API URL.
	Address string
	// SecretEnv names the variable holding the secret the nodes share.
	SecretEnv string
	// Prefer makes this node active when both start.
	Prefer bool
	// CAFile verifies an https peer whose CA is not in the system's roots.
	CAFile string
	// Sync makes each write wait until the standby applied it.
	Sync bool
	// FailoverAfter is how long the active may be silent before the
	// standby takes over.
	FailoverAfter time.Duration
}

// tokenValues reads the API tokens from their environment variables: holder
// → token. An unset or empty variable is an error naming it, and so is no
// token at all on an address reachable beyond this host.
func tokenValues(opts Options) (map[string]string, error) {
	names := make([]string, 0, len(opts.APITokens))
	for name := range opts.APITokens {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make(map[string]string, len(names))
	for _, name := range names {
		env := opts.APITokens[name]
		v := strings.TrimSpace(os.Getenv(env))
		if v == "" {
			return nil, fmt.Errorf("site.api_tokens.%s: $%s is not set: export the token there, or remove the entry", name, env)
		}
		out[name] = v
	}
	if !httpserve.IsLoopback(opts.Listen) && len(out) == 0 {
		return nil, fmt.Errorf("site.listen %q is reachable beyond this host: name a token in site.api_tokens (the API runs writes and calls for whoever asks)", opts.Listen)
	}
	return out, nil
}
