package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/operator"
)

// A stack moved off the default addresses, as the config `outpost dev`
// writes beside it says.
const movedStack = `
temporal:
  address: 127.0.0.1:7300
  namespace: stack
  encryption_keys: [{id: dev, file: .outpost-dev/encryption.key}]
site: {id: plant-9, store: .outpost-dev/site.db, listen: "127.0.0.1:8580"}
central: {store: {path: stack/central.db}, temporal_ui_url: "http://127.0.0.1:8300"}
dev: {data_dir: .outpost-dev}
log: {level: error}
`

// Without --config, the operator commands run beside `outpost dev` use the
// config the stack runs with: its Temporal address, namespace and payload
// key, its central store. They dialled 7233 and read outpost-central.db before.
func TestCommandsBesideTheDevStackUseItsConfig(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.MkdirAll(".outpost-dev", 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(".outpost-dev", "outpost.yaml"), []byte(movedStack), 0o600))
	key, err := devKey(".outpost-dev")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll("stack", 0o755))
	var store *centralstore.Store
	store, err = centralstore.OpenSQLite(context.Background(), filepath.Join("stack", "central.db"))
	require.NoError(t, err)
	require.NoError(t, store.Close())

	var dialled []config.Temporal
	f := newFake()
	f.listed(parkedQuery())
	prev := dialOperator
	dialOperator = func(cfg config.Temporal, _ *zap.Logger) (operator.Temporal, func(), error) {
		dialled = append(dialled, cfg)
		return f, func() {}, nil
	}
	t.Cleanup(func() { dialOperator = prev })

	_, _, err = runWith(t, "", "parked", "list", "--json")
	require.NoError(t, err)
	_, _, _ = runWith(t, "", "status", "9b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11") // not at central: only the address matters
	require.Len(t, dialled, 2)
	for _, d := range dialled {
		require.Equal(t, "127.0.0.1:7300", d.Address)
		require.Equal(t, "stack", d.Namespace)
		require.Equal(t, []config.EncryptionKey{key}, d.EncryptionKeys, "the stack's payload key")
	}

	_, _, err = runWith(t, "", "kpi", "--json")
	require.NoError(t, err, "kpi reads the stack's central store")

	// --config still means that file over the production defaults.
	_, _, err = runWith(t, "", "kpi", "--config", quietConfig(t))
	require.ErrorContains(t, err, "no central store at outpost-central.db")
}

// `config check --dev` reads a file over the dev defaults, as `outpost dev`
// runs it: overriding the demo system's base_url is a whole system there.
// Over the production defaults the same file lacks methods, and the check
// says how to judge it as a dev file.
func TestConfigCheckJudgesADevFileAsDevRunsIt(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "site:\n  external_systems:\n    demo: {base_url: \"http://127.0.0.1:9191/api\"}\ndev:\n  demo_system: 127.0.0.1:9191\n")
	out, _, err := run(t, "config", "check", "--dev", path)
	require.NoError(t, err)
	require.Contains(t, out, path+": ok")

	out, _, err = run(t, "config", "check", path)
	require.Error(t, err)
	require.Contains(t, out, "at least one method is required")
	require.Contains(t, out, "config check --dev")
}

// `outpost dev` writes the config it runs with under dev.data_dir, readable
// by its owner alone, and that file means the same over the production
// defaults, which the other commands read it over, as it did to the stack.
func TestDevWritesTheConfigItRunsWith(t *testing.T) {
	t.Parallel()
	cfg := config.DevDefault()
	cfg.Dev.DataDir = t.TempDir()
	cfg.Temporal.Address = "127.0.0.1:7300"
	cfg.Site.APITokens = map[string]string{"scripts": "OUTPOST_SITE_TOKEN"}
	dev, err := devSettings(cfg)
	require.NoError(t, err)

	path, err := writeDevConfig(dev.cfg)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(cfg.Dev.DataDir, "outpost.yaml"), path)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	read, err := config.Load(path, config.Default())
	require.NoError(t, err)
	// Compared as YAML: an empty list reads back as empty, not nil.
	want, err := yaml.Marshal(dev.cfg)
	require.NoError(t, err)
	got, err := yaml.Marshal(read)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
	require.Equal(t, "127.0.0.1:7300", read.Temporal.Address)
	require.Equal(t, dev.cfg.Temporal.EncryptionKeys, read.Temporal.EncryptionKeys)
	require.Equal(t, dev.cfg.Site.ExternalSystems, read.Site.ExternalSystems)
}
