// Package testutil holds helpers shared by Outpost's tests.
package testutil

import (
	"testing"
	"time"

	"github.com/outpost-dev/outpost/internal/freeport"
)

// FreePort returns a loopback TCP port for a server the test starts, and
// keeps it for this test alone until the test ends (see freeport.Reserve:
// below the kernel's ephemeral range, locked against other test processes).
func FreePort(t testing.TB) int {
	t.Helper()
	port, release, err := freeport.Reserve(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return port
}

// SkipIfShort skips a test that starts a Temporal dev server (or the whole
// stack) under `go test -short`, the fast local loop; the README's test
// command runs everything.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a Temporal dev server: run without -short")
	}
}

// WaitFor polls cond every 200 ms until it holds; what describes the wait
// when it times out.
func WaitFor(t testing.TB, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what())
		}
		time.Sleep(200 * time.Millisecond)
	}
}
