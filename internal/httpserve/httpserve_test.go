package httpserve

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Past the cap a connection is answered 503 at once and closed. A client
// that opens a connection and sends nothing is cut off by
// ReadHeaderTimeout, so it cannot keep its slot, and the slots free again.
func TestLimitListenerAnswersTheExcessAtOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := Server(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.ReadHeaderTimeout = 300 * time.Millisecond
	go srv.Serve(LimitListener(ln, 3)) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })

	var idle []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		idle = append(idle, c)
	}
	time.Sleep(50 * time.Millisecond) // let the server accept them

	over, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	require.NoError(t, over.SetReadDeadline(time.Now().Add(2*time.Second)))
	status, err := bufio.NewReader(over).ReadString('\n')
	require.NoError(t, err, "answered at once, not left in the backlog")
	require.True(t, strings.HasPrefix(status, "HTTP/1.1 503"), status)
	over.Close()

	// The idle connections never sent a request: the server closes them.
	for _, c := range idle {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
		_, err := c.Read(make([]byte, 1))
		require.Error(t, err, "closed by the server")
		c.Close()
	}
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 2*time.Second, 20*time.Millisecond, "slots are free again")
}

// A connection that never sent a request does not make a stop fail:
// net/http's Shutdown counts it busy for its first five seconds, as long as
// the grace, so Shutdown closes it once the grace is over and answers nil.
func TestShutdownClosesAConnectionThatNeverSentARequest(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := Server(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	silent, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer silent.Close()
	// The server accepts in order: once this request is answered, the
	// silent connection is the server's.
	resp, err := http.Get("http://" + ln.Addr().String())
	require.NoError(t, err)
	resp.Body.Close()

	start := time.Now()
	require.NoError(t, Shutdown(srv))
	require.Less(t, time.Since(start), ShutdownGrace+2*time.Second)
	require.ErrorIs(t, <-served, http.ErrServerClosed)
	_, err = silent.Read(make([]byte, 1))
	require.Error(t, err, "the silent connection is closed")
}

// A server answers to localhost, IP addresses, its listen host when that is
// a name, and the names configured; a rebound DNS name is none of those.
func TestHostAllowed(t *testing.T) {
	t.Parallel()
	names := HostNames("outpost-central.plant.example:8481", []string{"outbox.example"})
	require.Equal(t, []string{"outbox.example", "outpost-central.plant.example"}, names)
	require.Equal(t, []string{"outbox.example"}, HostNames("127.0.0.1:8481", []string{"outbox.example"}))
	require.Empty(t, HostNames(":8481", nil))
	for _, host := range []string{"localhost", "LOCALHOST:8481", "127.0.0.1:8481", "[::1]:8481", "192.0.2.10",
		"outbox.example:8481", "Outbox.Example.", "outpost-central.plant.example:8481"} {
		require.True(t, HostAllowed(host, names), host)
	}
	for _, host := range []string{"evil.example:8481", "evil.example", "", " ", ":8481", "outbox.example.evil.example", "localhost.evil.example"} {
		require.False(t, HostAllowed(host, names), host)
	}
}
