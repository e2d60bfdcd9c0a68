package siteconfig

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// Every field of an external system and a database reaches the targets'
// definitions, and comes back unchanged for CheckTargets.
func TestTargetsCarryEveryField(t *testing.T) {
	t.Parallel()
	var cfg config.Site
	testutil.FillDistinct(&cfg)
	systems, databases := ExternalSystems(cfg.ExternalSystems), Databases(cfg.Databases)
	testutil.RequireCarried(t, cfg.ExternalSystems, systems)
	testutil.RequireCarried(t, cfg.Databases, databases)
	require.Equal(t, cfg.ExternalSystems, configSystems(systems))
	require.Equal(t, cfg.Databases, configDatabases(databases))
}

// Every field of Site is set from the file's site section.
func TestFromConfigSetsEveryField(t *testing.T) {
	t.Parallel()
	var cfg config.Site
	testutil.FillDistinct(&cfg)
	s := FromConfig(cfg)
	testutil.RequireSet(t, s)
	require.Equal(t, Site{
		ID: cfg.ID, Node: cfg.Node, Store: cfg.Store, CommitBatch: cfg.CommitBatch, CommitDelay: cfg.CommitDelay,
		MaxBodyBytes: cfg.MaxBodyBytes, ExternalSystems: s.ExternalSystems, Databases: s.Databases,
	}, s)
}

// A file entry's defaults are the targets' (and so the SDK's).
func TestDefaultsAreTheTargets(t *testing.T) {
	t.Parallel()
	sys := ExternalSystems(map[string]config.ExternalSystem{"a": config.DefaultExternalSystem()})
	require.Equal(t, targets.DefaultExternalSystem(), sys["a"])
	db := Databases(map[string]config.Database{"a": config.DefaultDatabase()})
	require.Equal(t, targets.DefaultDatabase(), db["a"])
}

// The config's group-commit defaults are the store's own.
func TestConfigCommitDefaultsAreTheStores(t *testing.T) {
	t.Parallel()
	d := config.Default().Site
	require.Equal(t, sitestore.DefaultCommitBatch, d.CommitBatch)
	require.Equal(t, sitestore.DefaultCommitDelay, d.CommitDelay)
}
