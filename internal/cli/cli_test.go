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
	for _, c := range commands {
		_, stderr, err := run(t, append(strings.Fields(c.name), "--help")...)
		require.NoError(t, err, c.name)
		require.Contains(t, stderr, "Usage: outpost "+c.name, c.name)
		require.Contains(t, stderr, "Example:", c.name)
	}
	_, _, err = run(t, "config", "check")
	require.ErrorIs(t, err, ErrUsage)

	// A config file given without --config must not run on the defaults.
	for _, name := range []string{"central", "site", "dev", "kpi"} {
		_, stderr, err := run(t, name, "/etc/outpost/outpost.yaml")
		require.ErrorIs(t, err, ErrUsage, name)
		require.ErrorContains(t, err, `unexpected argument "/etc/outpost/outpost.yaml" (the config file goes after --config)`, name)
		require.Equal(t, "Run 'outpost "+name+" --help' for its flags and an example.\n", stderr, name)
	}
}

// A mistyped flag or command is one line naming the nearest known one and
// where to look; nothing else reaches stderr (main prints the line).
func TestMistypedFlagOrCommandIsOneLineWithASuggestion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"parked", "list", "--confg", "x.yaml"}, `unknown flag --confg for "parked list"; did you mean --config? (outpost parked list --help)`},
		{[]string{"kpi", "--windw", "1h"}, `unknown flag --windw for "kpi"; did you mean --window? (outpost kpi --help)`},
		{[]string{"kpi", "--frobnicate"}, `unknown flag --frobnicate for "kpi" (outpost kpi --help)`},
		{[]string{"parkd", "list"}, `unknown command "parkd"; did you mean "parked"? (outpost --help lists all)`},
		{[]string{"stat"}, `unknown command "stat"; did you mean "status"? (outpost --help lists all)`},
		{[]string{"frobnicate"}, `unknown command "frobnicate" (outpost --help lists all)`},
	}
	for _, c := range cases {
		stdout, stderr, err := run(t, c.args...)
		require.ErrorIs(t, err, ErrUsage, c.args)
		require.Equal(t, c.want, err.Error(), c.args)
		require.Empty(t, stderr, c.args)
		require.Empty(t, stdout, c.args)
	}
}

func TestSuggestion(t *testing.T) {
	t.Parallel()
	known := []string{"config", "format", "since", "site", "yes"}
	for typed, want := range map[string]string{
		"confg": "config", "cnofig": "config", "conf": "config", "sit": "site",
		"format": "format", "sine": "since", "ys": "yes", "x": "", "zzzzzz": "",
	} {
		require.Equal(t, want, suggestion(typed, known), typed)
	}
}

// --version names the build.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, "--version")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, "outpost "), out)
	require.Contains(t, out, "go1.")
}
