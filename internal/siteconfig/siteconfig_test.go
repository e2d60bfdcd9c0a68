package siteconfig

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/testutil"
)

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

// The config's group-commit defaults are the store's own.
func TestConfigCommitDefaultsAreTheStores(t *testing.T) {
	t.Parallel()
	d := config.Default().Site
	require.Equal(t, sitestore.DefaultCommitBatch, d.CommitBatch)
	require.Equal(t, sitestore.DefaultCommitDelay, d.CommitDelay)
}
