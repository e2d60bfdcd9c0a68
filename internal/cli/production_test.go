package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
)

// `config check --production` reports the defaults a production system
// must not keep: plain payloads in Temporal and a site API without
// tokens. A file that sets both passes; without the flag neither is a
// problem (they are the right defaults on a developer's machine).
func TestConfigCheckProductionReportsPlainPayloadsAndNoTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := filepath.Join(dir, "open.yaml")
	require.NoError(t, os.WriteFile(open, []byte("site: {id: plant-1}\n"), 0o644))
	out, _, err := run(t, "config", "check", open)
	require.NoError(t, err)
	require.Contains(t, out, "open.yaml: ok")

	out, _, err = run(t, "config", "check", "--production", open)
	require.ErrorContains(t, err, "2 problem(s)")
	require.Contains(t, out, "temporal.encryption_keys: empty: every payload")
	require.Contains(t, out, "site.api_tokens: empty: any process on the site host")

	closed := filepath.Join(dir, "closed.yaml")
	require.NoError(t, os.WriteFile(closed, []byte(`
temporal: {encryption_keys: [{id: k1, env: OUTPOST_PAYLOAD_KEY}]}
site: {api_tokens: {scada: OUTPOST_SITE_TOKEN}}
`), 0o644))
	out, _, err = run(t, "config", "check", "--production", closed)
	require.NoError(t, err)
	require.Contains(t, out, "closed.yaml: ok")
}

// `config check --production --for central` judges a central host's file
// by the risks `outpost central` warns of: a file with keys and no site
// tokens passes, as it would not for a site (`--for site`) or for any
// process (no --for); a file without keys fails either way.
func TestConfigCheckProductionForOneProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	central := filepath.Join(dir, "central.yaml")
	require.NoError(t, os.WriteFile(central, []byte("temporal: {encryption_keys: [{id: k1, env: OUTPOST_PAYLOAD_KEY}]}\n"), 0o644))
	out, _, err := run(t, "config", "check", "--production", "--for", "central", central)
	require.NoError(t, err)
	require.Contains(t, out, "central.yaml: ok")

	out, _, err = run(t, "config", "check", "--production", "--for", "site", central)
	require.ErrorContains(t, err, "1 problem(s)")
	require.Contains(t, out, "site.api_tokens: empty")
	_, _, err = run(t, "config", "check", "--production", central)
	require.ErrorContains(t, err, "1 problem(s)")

	plain := filepath.Join(dir, "plain.yaml")
	require.NoError(t, os.WriteFile(plain, []byte("central: {listen: 127.0.0.1:8481}\n"), 0o644))
	out, _, err = run(t, "config", "check", "--production", "--for", "central", plain)
	require.ErrorContains(t, err, "1 problem(s)")
	require.Contains(t, out, "temporal.encryption_keys: empty")

	_, _, err = run(t, "config", "check", "--for", "central", plain)
	require.ErrorContains(t, err, "--for needs --production")
	_, _, err = run(t, "config", "check", "--production", "--for", "airgap", plain)
	require.ErrorContains(t, err, `--for is central or site, not "airgap"`)
}

// `outpost central` and `outpost site` log each production risk of their
// config at start, naming the risk and the setting that removes it.
func TestStartWarnsOfProductionRisks(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	warnProductionRisks(zap.New(core), config.Default(), "temporal.encryption_keys", "site.api_tokens")
	require.Equal(t, 2, logs.Len())
	for i, path := range []string{"temporal.encryption_keys", "site.api_tokens"} {
		e := logs.All()[i]
		require.Equal(t, "production risk: "+path+" is empty", e.Message)
		require.NotEmpty(t, e.ContextMap()["risk"])
	}

	core, logs = observer.New(zap.WarnLevel)
	cfg := config.Default()
	cfg.Temporal.EncryptionKeys = []config.EncryptionKey{{ID: "k1", Env: "OUTPOST_PAYLOAD_KEY"}}
	warnProductionRisks(zap.New(core), cfg, "temporal.encryption_keys")
	require.Zero(t, logs.Len(), "keys set: nothing to warn of")
}

// `outpost dev` encrypts payloads as production does: with no key in the
// config it makes one under dev.data_dir (readable by its owner alone) and
// keeps it, so the dev server's stored histories stay readable on the
// next run; the Web UI decodes them through central's codec server.
func TestDevRunsWithAGeneratedKeyAndTheCodecServer(t *testing.T) {
	t.Parallel()
	cfg := config.DevDefault()
	cfg.Dev.DataDir = t.TempDir()
	cfg.Central.Listen = "127.0.0.1:18481"
	cfg.Dev.TemporalUIPort = 18233

	dev, err := devSettings(cfg)
	require.NoError(t, err)
	require.Len(t, dev.cfg.Temporal.EncryptionKeys, 1)
	key := dev.cfg.Temporal.EncryptionKeys[0]
	info, err := os.Stat(key.File)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	_, err = fromconfig.PayloadCodec(dev.cfg.Temporal.EncryptionKeys)
	require.NoError(t, err, "the key is one the codec reads")
	first, err := os.ReadFile(key.File)
	require.NoError(t, err)

	require.Equal(t, "http://127.0.0.1:18481/codec", dev.uiCodecEndpoint)
	require.Equal(t, []string{"http://127.0.0.1:18233"}, dev.cfg.Central.CodecOriginList(), "the dev Web UI may call the codec server")

	again, err := devSettings(cfg)
	require.NoError(t, err)
	second, err := os.ReadFile(again.cfg.Temporal.EncryptionKeys[0].File)
	require.NoError(t, err)
	require.Equal(t, first, second, "the key is kept across runs")

	// A config that names keys keeps them.
	cfg.Temporal.EncryptionKeys = []config.EncryptionKey{{ID: "mine", Env: "OUTPOST_PAYLOAD_KEY"}}
	dev, err = devSettings(cfg)
	require.NoError(t, err)
	require.Equal(t, cfg.Temporal.EncryptionKeys, dev.cfg.Temporal.EncryptionKeys)
}
