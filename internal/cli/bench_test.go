package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// bench --cpuprofile writes this process's CPU profile over the run, in
// the format go tool pprof reads (gzip-compressed protobuf).
func TestBenchWritesCPUProfile(t *testing.T) {
	t.Parallel()
	profile := filepath.Join(t.TempDir(), "cpu.pprof")
	_, stderr, err := run(t, "bench", "--only", "enqueue", "--callers", "1", "--enqueue-duration", "100ms",
		"--dir", t.TempDir(), "--cpuprofile", profile)
	require.NoError(t, err, "%s", stderr)
	data, err := os.ReadFile(profile)
	require.NoError(t, err)
	require.Greater(t, len(data), 2)
	require.Equal(t, []byte{0x1f, 0x8b}, data[:2], "a gzip-compressed profile")
}

// A profile that cannot be written fails the run before it starts, naming
// the flag.
func TestBenchRefusesAnUnwritableCPUProfile(t *testing.T) {
	t.Parallel()
	_, _, err := run(t, "bench", "--only", "enqueue", "--cpuprofile", filepath.Join(t.TempDir(), "no-such-dir", "cpu.pprof"))
	require.ErrorContains(t, err, "--cpuprofile")
}
