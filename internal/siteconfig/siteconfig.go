// Package siteconfig translates the site section of Outpost's YAML config
// (package config) into the definitions the site's engines take: the
// targets' ExternalSystem and Database, and what the site SDK's OpenConfig
// reads of the file. It is the one bridge the SDK (package site) has to the
// YAML types; the CLI translates the rest of the file (internal/cli).
package siteconfig

import (
	"time"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/targets"
)

// Site is what a script's client (site.OpenConfig) takes from the file's
// site section.
type Site struct {
	ID, Node string
	// Store is the site store's file, opened with CommitBatch and CommitDelay.
	Store       string
	CommitBatch int
	CommitDelay time.Duration
	// MaxBodyBytes limits a notification body.
	MaxBodyBytes    int
	ExternalSystems map[string]targets.ExternalSystem
	Databases       map[string]targets.Database
}

// Load reads and checks the config file, then translates its site section.
func Load(file string) (Site, error) {
	cfg, err := config.Load(file, config.Default())
	if err != nil {
		return Site{}, err
	}
	return FromConfig(cfg.Site), nil
}

// FromConfig is the part of the site section a script's client uses.
func FromConfig(s config.Site) Site {
	return Site{
		ID: s.ID, Node: s.Node, Store: s.Store, CommitBatch: s.CommitBatch, CommitDelay: s.CommitDelay,
		MaxBodyBytes: s.MaxBodyBytes, ExternalSystems: ExternalSystems(s.ExternalSystems), Databases: Databases(s.Databases),
	}
}

// ExternalSystems translates site.external_systems.
func ExternalSystems(in map[string]config.ExternalSystem) map[string]targets.ExternalSystem {
	return mapValues(in, func(e config.ExternalSystem) targets.ExternalSystem {
		return targets.ExternalSystem{
			BaseURL: e.BaseURL, Methods: mapValues(e.Methods, func(m config.Method) targets.Method { return targets.Method(m) }),
			Timeout: e.Timeout, AuthHeader: e.AuthHeader, AuthEnv: e.AuthEnv, IdempotencyHeader: e.IdempotencyHeader,
			MaxRetries: e.MaxRetries, RetryInterval: e.RetryInterval,
		}
	})
}

// Databases translates site.databases.
func Databases(in map[string]config.Database) map[string]targets.Database {
	return mapValues(in, func(d config.Database) targets.Database { return targets.Database(d) })
}

// CheckTargets checks external systems and databases given in code (the
// SDK's site.Options) by the rules `outpost config check` applies to a
// file's, with the same messages: it translates them back to the file's
// types for config.CheckTargets.
func CheckTargets(systems map[string]targets.ExternalSystem, databases map[string]targets.Database) error {
	return config.CheckTargets(configSystems(systems), configDatabases(databases))
}

func configSystems(in map[string]targets.ExternalSystem) map[string]config.ExternalSystem {
	return mapValues(in, func(e targets.ExternalSystem) config.ExternalSystem {
		return config.ExternalSystem{
			BaseURL: e.BaseURL, Methods: mapValues(e.Methods, func(m targets.Method) config.Method { return config.Method(m) }),
			Timeout: e.Timeout, AuthHeader: e.AuthHeader, AuthEnv: e.AuthEnv, IdempotencyHeader: e.IdempotencyHeader,
			MaxRetries: e.MaxRetries, RetryInterval: e.RetryInterval,
		}
	})
}

func configDatabases(in map[string]targets.Database) map[string]config.Database {
	return mapValues(in, func(d targets.Database) config.Database { return config.Database(d) })
}

// mapValues is in with every value translated by f; nil stays nil.
func mapValues[A, B any](in map[string]A, f func(A) B) map[string]B {
	if in == nil {
		return nil
	}
	out := make(map[string]B, len(in))
	for k, v := range in {
		out[k] = f(v)
	}
	return out
}

// IsSiteName is the file's rule for site.id and site.node, which the SDK
// applies to its Options' SiteID and Node too.
func IsSiteName(s string) bool { return config.IsSiteName(s) }

// MaxBodyBytesLimit is the file's limit on site.max_body_bytes, which the
// SDK applies to Options.MaxBodyBytes too.
const MaxBodyBytesLimit = config.MaxBodyBytesLimit
