// Package testutil holds helpers shared by Outpost's tests.
package testutil

import (
	"net"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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
