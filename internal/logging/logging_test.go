package logging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Console logs carry colour codes only on a terminal.
func TestConsoleColourOnlyOnATerminal(t *testing.T) {
	t.Parallel()
	for _, terminal := range []bool{false, true} {
		cfg, err := config("info", "console", terminal)
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "log")
		cfg.OutputPaths = []string{path}
		log, err := cfg.Build()
		require.NoError(t, err)
		log.Warn("pump 3 tripped")
		require.NoError(t, log.Sync())
		out, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Contains(t, string(out), "pump 3 tripped")
		require.Equal(t, terminal, strings.Contains(string(out), "\x1b["), "terminal=%v: %q", terminal, out)
	}
	require.False(t, isTerminal(mustTemp(t)), "a file is not a terminal")
}

func mustTemp(t *testing.T) *os.File {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}
