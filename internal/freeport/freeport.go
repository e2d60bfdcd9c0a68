// Package freeport picks loopback TCP ports for servers this machine's
// tests and dev stacks start, without two processes picking the same one.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Reserve returns a loopback TCP port below max (at most the start of the
// kernel's ephemeral range) that nothing listens on, and keeps it for the
// caller alone until release is called.
//
// A port from listen(":0") is in the kernel's ephemeral range, which every
// outgoing connection on the machine also draws from: under `go test ./...`
// another package's gRPC client or dev server could take it between this
// call and the server's bind, and a test then talked to someone else's
// server. So Reserve picks below the ephemeral range, where the kernel never
// hands out ports on its own, and holds a lock file per port in the temp
// folder so that concurrent processes never pick the same one.
func Reserve(max int) (port int, release func(), err error) {
	lo, hi := 10000, min(max, ephemeralStart())
	lockDir := filepath.Join(os.TempDir(), "outpost-test-ports")
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return 0, nil, fmt.Errorf("find a free port: %w", err)
	}
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if lock, ok := reservePort(lockDir, port); ok {
			return port, func() { lock.Close() }, nil // closing releases the lock
		}
	}
	return 0, nil, fmt.Errorf("find a free port: none free in %d-%d after 1000 tries", lo, hi)
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
// default 32768), the ceiling of the ports Reserve picks.
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
