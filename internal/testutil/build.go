package testutil

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ModuleRoot is the directory of the outpost module the test runs in.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatalf("find the module root: go list -m: %v", err)
	}
	return strings.TrimSpace(string(root))
}

// BuildOutpost builds cmd/outpost from the module root into a temporary
// directory and returns the binary's path.
func BuildOutpost(t testing.TB) string {
	t.Helper()
	return BuildOutpostFrom(t, ModuleRoot(t))
}

// BuildOutpostFrom builds cmd/outpost of the module at dir, with the extra
// go build flags, into a temporary directory and returns the binary's path.
func BuildOutpostFrom(t testing.TB, dir string, flags ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outpost")
	cmd := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), "./cmd/outpost")...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/outpost in %s: %v\n%s", dir, err, out)
	}
	return bin
}
