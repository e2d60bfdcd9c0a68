package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testutil"
)

// The binary built the way the README says (go build -trimpath in a
// checkout) names its version, commit and commit date, and a mistyped
// flag or command is told on stderr once, in one line.
func TestBuiltBinary(t *testing.T) {
	t.Parallel()
	checkout, commit, date := snapshotCheckout(t)
	bin := testutil.BuildOutpostFrom(t, checkout, "-trimpath", "-buildvcs=true")

	t.Run("version names the commit", func(t *testing.T) {
		for _, args := range [][]string{{"--version"}, {"version"}} {
			out, err := exec.Command(bin, args...).Output()
			require.NoError(t, err, args)
			require.Regexp(t, `^outpost v0\.0\.0-\d{14}-`+commit[:12]+` \(commit `+commit+`, `+date+`\), go1\.\d+`, string(out), args)
		}
	})
	t.Run("a mistyped flag or command is one line", func(t *testing.T) {
		for args, want := range map[string]string{
			"parked list --confg x.yaml": `outpost: unknown flag --confg for "parked list"; did you mean --config? (outpost parked list --help)` + "\n",
			"parkd list":                 `outpost: unknown command "parkd"; did you mean "parked"? (outpost --help lists all)` + "\n",
		} {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, strings.Fields(args)...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			var exit *exec.ExitError
			require.True(t, errors.As(cmd.Run(), &exit), args)
			require.Equal(t, 2, exit.ExitCode(), args)
			require.Equal(t, want, stderr.String(), args)
			require.Empty(t, stdout.String(), args)
		}
	})
}

// snapshotCheckout commits this module's working tree (tracked and new
// files, as they are now) to a fresh git repository and returns its
// directory, commit and commit time. Go stamps no VCS information when
// building in a linked git worktree (its .git is a file: golang/go#58218),
// so the test builds in a repository of its own, wherever it runs.
func snapshotCheckout(t *testing.T) (dir, commit, date string) {
	t.Helper()
	root := testutil.ModuleRoot(t)
	dir = t.TempDir()
	files, err := gitIn(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	require.NoError(t, err)
	for name := range strings.SplitSeq(strings.TrimSuffix(files, "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree, not yet in git
		}
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "-A"},
		{"-c", "user.name=outpost test", "-c", "user.email=test@outpost.invalid", "commit", "-q", "--no-verify", "-m", "snapshot"},
	} {
		_, err := gitIn(dir, args...)
		require.NoError(t, err, args)
	}
	commit, err = gitIn(dir, "rev-parse", "HEAD")
	require.NoError(t, err)
	unix, err := gitIn(dir, "show", "-s", "--format=%ct", "HEAD")
	require.NoError(t, err)
	seconds, err := strconv.ParseInt(unix, 10, 64)
	require.NoError(t, err)
	return dir, commit, time.Unix(seconds, 0).UTC().Format(time.RFC3339)
}

func gitIn(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return "", errors.New("git " + strings.Join(args, " ") + ": " + strings.TrimSpace(string(exit.Stderr)))
	}
	return strings.TrimSpace(string(out)), err
}
