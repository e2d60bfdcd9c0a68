// Package targetcalls makes a site client's cached calls and database
// writes (Call, Write): the HTTP client of the site's external systems and
// the SQLite and SQL Server drivers of its databases. Package site leaves
// them out so that a script that only notifies does not link them
// (net/http alone is some 185 packages, the SQL Server driver as many).
//
// A script that calls or writes opens its client with OpenConfig, or gives
// site.Open its targets and Options.Calls = targetcalls.New.
package targetcalls

import (
	"context"

	"github.com/outpost-dev/outpost/internal/siteconfig"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/site"
)

// New makes the calls and writes of a client to the targets reg defines:
// the value of site.Options.Calls.
func New(reg *targets.Registry) site.Executor { return targetexec.New(reg) }

// OpenConfig opens the site of an Outpost config file (the one its daemon
// runs with) for a script: its store, its external systems and databases.
// Options.SiteID, Node, MaxBodyBytes, CommitBatch and CommitDelay default
// to the file's; its targets replace any in opts.
func OpenConfig(ctx context.Context, file string, opts site.Options) (*site.Client, error) {
	cfg, err := siteconfig.Load(file)
	if err != nil {
		return nil, err
	}
	return site.Open(ctx, cfg.Store, withSite(opts, cfg))
}

// withSite is opts with the file's site section where opts leaves a field
// zero, and the file's targets.
func withSite(opts site.Options, cfg siteconfig.Site) site.Options {
	if opts.SiteID == "" {
		opts.SiteID = cfg.ID
	}
	if opts.Node == "" {
		opts.Node = cfg.Node
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = cfg.MaxBodyBytes
	}
	if opts.CommitBatch == 0 {
		opts.CommitBatch = cfg.CommitBatch
	}
	if opts.CommitDelay == 0 {
		opts.CommitDelay = cfg.CommitDelay
	}
	opts.ExternalSystems, opts.Databases, opts.Calls = cfg.ExternalSystems, cfg.Databases, New
	return opts
}
