// Package testutil holds helpers shared by Outpost's tests.
package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FreePort returns a loopback TCP port for a server the test starts, and
// keeps it for this test alone until the test ends.
//
// A port from listen(":0") is in the kernel's ephemeral range, which every
// outgoing connection on the machine also draws from: under `go test ./...`
// another package's gRPC client or dev server could take it between this
// call and the server's bind, and the test then talked to someone else's
// server. So FreePort picks below the ephemeral range, where the kernel never
// hands out ports on its own, and holds a lock file per port in the temp
// folder so that concurrent test processes never pick the same one.
func FreePort(t testing.TB) int {
	t.Helper()
	lo, hi := 10000, ephemeralStart()
	lockDir := filepath.Join(os.TempDir(), "outpost-test-ports")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if lock, ok := reservePort(lockDir, port); ok {
			t.Cleanup(func() { lock.Close() }) // closing releases the lock
			return port
		}
	}
	t.Fatalf("find a free port: none free in %d-%d after 1000 tries", lo, hi)
	return 0
}

// reservePort takes port's lock file and checks nothing listens on it.
func reservePort(lockDir string, port int) (*os.File, bool) {
	lock, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false
	}
	if syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		lock.Close()
		return nil, false
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		lock.Close()
		return nil, false
	}
	ln.Close()
	return lock, true
}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux
// default 32768), the ceiling of the ports FreePort picks.
func ephemeralStart() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(fields[0])
	if err != nil || n <= 11000 {
		return 32768
	}
	return n
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
