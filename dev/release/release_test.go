package main

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testutil"
)

// The release builds a static, path-free outpost for each Linux machine,
// with its checksum, and the binary names the commit it was built from.
func TestReleaseBuildsLinuxAMD64AndARM64(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles outpost twice, minutes on a loaded machine; CI runs it (no -short)")
	}
	t.Parallel()
	root, out := testutil.ModuleRoot(t), t.TempDir()
	require.NoError(t, release(root, out))

	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	require.NoError(t, err)
	for name, machine := range map[string]elf.Machine{"outpost-linux-amd64": elf.EM_X86_64, "outpost-linux-arm64": elf.EM_AARCH64} {
		path := filepath.Join(out, name)
		f, err := elf.Open(path)
		require.NoError(t, err, name)
		require.Equal(t, machine, f.Machine, name)
		require.Equal(t, elf.ET_EXEC, f.Type, name)
		for _, p := range f.Progs {
			require.NotEqual(t, elf.PT_INTERP, p.Type, "%s is dynamically linked: CGO_ENABLED=0 makes it run on any Linux", name)
		}
		require.NoError(t, f.Close())
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		require.False(t, bytes.Contains(data, []byte(root)), "%s holds the build's path %s: -trimpath keeps it out", name, root)
		require.Contains(t, string(sums), fmt.Sprintf("%x  %s\n", sha256.Sum256(data), name))
	}

	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		return // the binary cannot run here
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	version, err := exec.Command(filepath.Join(out, "outpost-linux-amd64"), "--version").Output()
	require.NoError(t, err)
	require.Contains(t, string(version), "(commit "+strings.TrimSpace(string(head)))
}
