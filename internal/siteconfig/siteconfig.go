// Package siteconfig is what the site SDK's targetcalls.OpenConfig reads of
// Outpost's YAML config (package config): the site's identity, store and
// targets (whose definitions are package targets' own, read from the file
// as they are). It is the one bridge the SDK has to the file, through
// package site/targetcalls (package site reads no file); the CLI
// translates the rest of it (internal/fromconfig).
package siteconfig

import (
	"time"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/targets"
)

// Site is what a script's client (targetcalls.OpenConfig) takes from the
// file's site section.
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
		MaxBodyBytes: s.MaxBodyBytes, ExternalSystems: s.ExternalSystems, Databases: s.Databases,
	}
}
