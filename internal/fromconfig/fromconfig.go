// Package fromconfig is where the YAML config (package config) meets the
// engines: one function per engine translates the file's section into the
// engine's own options, so no engine imports package config. The CLI calls
// these after loading the file; test harnesses (bench, e2e) call them on
// config.Default. The site SDK's translation is in internal/siteconfig,
// which the SDK imports itself.
package fromconfig

import (
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/siteconfig"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
)

// SiteDaemon is the site daemon's options from the file's site section.
func SiteDaemon(s config.Site) sitedaemon.Options {
	return sitedaemon.Options{
		ID: s.ID, Node: s.Node, Store: s.Store, CommitBatch: s.CommitBatch, CommitDelay: s.CommitDelay,
		Listen: s.Listen, APIHosts: s.APIHosts, APITokens: s.APITokens, TLSCertFile: s.TLSCertFile, TLSKeyFile: s.TLSKeyFile,
		MetricsNeedToken: s.MetricsNeedToken, RedactFields: s.RedactFields, HideSubject: s.WorkflowSummary == config.SummaryListOnly,
		ForwardInterval: s.ForwardInterval, ForwardBatch: s.ForwardBatch, ForwardParallelism: s.ForwardParallelism,
		PollInterval: s.PollInterval, MaxBodyBytes: s.MaxBodyBytes,
		TrackingRetention: s.TrackingRetention, PurgeInterval: s.PurgeInterval,
		TelemetryBatch: s.TelemetryBatch, TelemetryDelay: s.TelemetryDelay, ReconcileInterval: s.ReconcileInterval,
		PollerCheckInterval: s.PollerCheckInterval,
		ExternalSystems: siteconfig.ExternalSystems(s.ExternalSystems), Databases: siteconfig.Databases(s.Databases),
	}
}
