package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr})
	return stdout.String(), stderr.String(), err
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, "config", "check", "../../dev/outpost.example.yaml")
	require.NoError(t, err)
	require.Contains(t, out, "outpost.example.yaml: ok")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("site:\n  listen: nope\ncentral:\n  smtp:\n    port: 0\n"), 0o644))
	out, _, err = run(t, "config", "check", bad)
	require.ErrorContains(t, err, "2 problem(s)")
	require.Contains(t, out, `site.listen (line 2): "nope" must be host:port`)
	require.Contains(t, out, "central.smtp.port (line 5): 0 must be a port")

	_, _, err = run(t, "config", "check", filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "no such file")
}

func TestUsage(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, "help")
	require.NoError(t, err)
	for _, c := range commands {
		require.Contains(t, out, c.name)
	}
	_, stderr, err := run(t, "frobnicate")
	require.ErrorIs(t, err, ErrUsage)
	require.Contains(t, stderr, "Commands:")

	for _, c := range commands {
		_, stderr, err = run(t, append(strings.Fields(c.name), "--help")...)
		require.NoError(t, err, c.name)
		require.Contains(t, stderr, "Usage: outpost "+c.name, c.name)
		require.Contains(t, stderr, "Example:", c.name)
	}
	_, _, err = run(t, "config", "check")
	require.ErrorIs(t, err, ErrUsage)

	// A config file given without --config must not run on the defaults.
	for _, name := range []string{"central", "site", "dev", "kpi"} {
		_, stderr, err = run(t, name, "/etc/outpost/outpost.yaml")
		require.ErrorIs(t, err, ErrUsage, name)
		require.ErrorContains(t, err, `unexpected argument "/etc/outpost/outpost.yaml" (the config file goes after --config)`, name)
		require.Equal(t, "Run 'outpost "+name+" --help' for its flags and an example.\n", stderr, name)
	}
}

// A mistyped flag gets the flag package's one line and a hint, not the
// whole help; --version names the build.
func TestWrongFlagIsOneLineAndAHint(t *testing.T) {
	t.Parallel()
	_, stderr, err := run(t, "kpi", "--windw", "1h")
	require.ErrorIs(t, err, ErrUsage)
	require.Equal(t, "flag provided but not defined: -windw\nRun 'outpost kpi --help' for its flags and an example.\n", stderr)

	out, _, err := run(t, "--version")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "outpost "), out)
	require.Contains(t, out, "go1.")
}
