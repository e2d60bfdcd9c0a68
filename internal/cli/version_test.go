package cli

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// --version names what is known of the build: the module version alone
// for `go install …@v1.2.3` (no VCS stamps), version, commit and commit
// date for a build in a checkout, and the release script's stamps where
// build info has none (a build in a linked git worktree).
func TestVersionFormat(t *testing.T) {
	t.Parallel()
	installed := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/outpost-dev/outpost", Version: "v1.2.3"}}
	require.Equal(t, "outpost v1.2.3, go1.26.8", formatVersion(installed, buildStamp{}))

	checkout := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.4-0.20250102030405-3f2a9c1d7e6b+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "3f2a9c1d7e6b5a4f3e2d1c0b9a8f7e6d5c4b3a29"},
			{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	require.Equal(t, "outpost v1.2.4-0.20250102030405-3f2a9c1d7e6b+dirty (commit 3f2a9c1d7e6b5a4f3e2d1c0b9a8f7e6d5c4b3a29, modified, 2025-01-02T03:04:05Z), go1.26.8",
		formatVersion(checkout, buildStamp{version: "v9", commit: "ffff", date: "2030-01-01T00:00:00Z"}), "build info wins over the stamps")

	worktree := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}
	require.Equal(t, "outpost v1.2.3-4-g3f2a9c1 (commit 3f2a9c1d7e6b5a4f3e2d1c0b9a8f7e6d5c4b3a29, 2025-01-02T03:04:05Z), go1.26.8",
		formatVersion(worktree, buildStamp{version: "v1.2.3-4-g3f2a9c1", commit: "3f2a9c1d7e6b5a4f3e2d1c0b9a8f7e6d5c4b3a29", date: "2025-01-02T03:04:05Z"}))
	require.Equal(t, "outpost (devel), go1.26.8", formatVersion(worktree, buildStamp{}))
	require.Equal(t, "outpost (devel)", formatVersion(nil, buildStamp{}))
}
