package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/airgapsync"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/site"
)

// airgapSetup is a site file holding one notification, exported to an
// unsigned bundle in its own folder, and a config naming the site file and
// a central store.
type airgapSetup struct {
	dir, config, bundle, centralDB string
}

func newAirgapSetup(t *testing.T) airgapSetup {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	s := airgapSetup{dir: dir, config: filepath.Join(dir, "outpost.yaml"), bundle: filepath.Join(dir, "usb", "ship-7.json"),
		centralDB: filepath.Join(dir, "central.db")}
	siteDB := filepath.Join(dir, "site.db")
	c, err := site.Open(ctx, siteDB, site.Options{SiteID: "ship-7", Node: "node-a"})
	require.NoError(t, err)
	_, err = c.Send(ctx, site.Notification{List: "ops", Subject: "Tank 7 low"})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, os.WriteFile(s.config, []byte("log:\n  level: error\nsite:\n  id: ship-7\n  node: node-a\n  store: "+siteDB+
		"\ncentral:\n  store:\n    path: "+s.centralDB+"\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Dir(s.bundle), 0o755))
	out, _, err := run(t, "airgap", "export", "--config", s.config, "-o", s.bundle)
	require.NoError(t, err, out)
	return s
}

// tamperedCopy writes a copy of the bundle whose notification's subject was
// changed after export, into a folder of its own, and returns its path.
func (s airgapSetup) tamperedCopy(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(s.bundle)
	require.NoError(t, err)
	require.Contains(t, string(data), "Tank 7 low")
	path := filepath.Join(s.dir, "tampered", "ship-7.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "Tank 7 low", "Tank 7 full")), 0o644))
	return path
}

// recordImported records the bundle as imported at central by whom (as
// an import run with no name for its operator would have).
func (s airgapSetup) recordImported(t *testing.T, by string) {
	t.Helper()
	ctx := context.Background()
	bundles, err := airgapsync.ReadBundles([]string{s.bundle})
	require.NoError(t, err)
	b := bundles[0]
	store, err := centralstore.OpenSQLite(ctx, s.centralDB)
	require.NoError(t, err)
	defer store.Close()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, store.RecordAirgapImport(ctx,
		centralstore.AirgapImportRun{RunID: uuid.NewString(), Outcome: centralstore.AirgapImported, BundleIDs: []string{b.BundleID}, Entries: 1, Imported: 1, ImportedBy: by, At: at},
		centralstore.AirgapImport{BundleID: b.BundleID, SiteID: "ship-7", Nodes: []string{"node-a"}, Entries: 1, Imported: 1, ImportedBy: by, ImportedAt: at}))
}

// --verify-only verifies the copy it is given, even of a bundle central
// imported before: a tampered copy fails and says why.
func TestAirgapVerifyOnlyVerifiesABundleImportedBefore(t *testing.T) {
	t.Parallel()
	s := newAirgapSetup(t)
	s.recordImported(t, "ana")
	tampered := s.tamperedCopy(t)

	out, _, err := run(t, "airgap", "import", "--config", s.config, "--allow-unsigned", "--verify-only", tampered)
	require.ErrorContains(t, err, "did not verify", out)
	require.Contains(t, out, "payload hash does not match")
	require.Contains(t, out, "already imported 2026-05-01T12:00:00Z by ana")
	require.NotContains(t, out, "nothing to do")

	out, _, err = run(t, "airgap", "import", "--config", s.config, "--allow-unsigned", "--verify-only", s.bundle)
	require.NoError(t, err, out)
	require.Contains(t, out, "already imported 2026-05-01T12:00:00Z by ana: nothing to do")
}

// An import recorded with no operator's name says so rather than leave a
// blank.
func TestAirgapImportedBeforeNamesNoBlankOperator(t *testing.T) {
	t.Parallel()
	s := newAirgapSetup(t)
	s.recordImported(t, "")
	out, _, err := run(t, "airgap", "import", "--config", s.config, "--allow-unsigned", "--verify-only", s.bundle)
	require.NoError(t, err, out)
	require.Contains(t, out, "already imported 2026-05-01T12:00:00Z by an operator not recorded: nothing to do")
}

// The operator recorded with an import defaults to $USER, and to the
// account's name when $USER is not set: never to a blank.
func TestOperatorNameIsNeverBlank(t *testing.T) {
	t.Setenv("USER", "")
	require.NotEmpty(t, defaultOperator())
	t.Setenv("USER", "ana")
	require.Equal(t, "ana", defaultOperator())
}

// airgap list exits non-zero when a file does not verify, and takes
// --allow-unsigned as its usage says.
func TestAirgapListFailsOnABadBundle(t *testing.T) {
	t.Parallel()
	s := newAirgapSetup(t)
	good := filepath.Dir(s.bundle)
	out, _, err := run(t, "airgap", "list", "--source", good, "--allow-unsigned")
	require.NoError(t, err, out)
	require.Regexp(t, `ship-7\.json\s+bundle .* yes\n`, out)

	out, _, err = run(t, "airgap", "list", "--source", good)
	require.ErrorContains(t, err, "1 of 1 file(s) in "+good+" did not verify", out)
	require.Contains(t, out, "no: bundle is not signed")

	bad := filepath.Dir(s.tamperedCopy(t))
	out, _, err = run(t, "airgap", "list", "--source", bad, "--allow-unsigned")
	require.ErrorContains(t, err, "did not verify", out)
	require.Contains(t, out, "no: ")

	out, _, err = run(t, "airgap", "list", "--source", bad, "--allow-unsigned", "--json")
	require.ErrorContains(t, err, "did not verify", out)
	require.Contains(t, out, `"Verified": false`)
}
