package linkproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/linkproxy"
)

// echoServer answers each line with the same line until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A long link delays every answer by at least its round trip, and carries
// many requests at once: ten sent together come back in order, each
// whole.
func TestRoundTripDelaysEveryAnswer(t *testing.T) {
	t.Parallel()
	p, err := linkproxy.Listen()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.SetTarget(echoServer(t))
	p.SetRoundTrip(200 * time.Millisecond)

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	start := time.Now()
	for i := range 10 {
		_, err := c.Write([]byte{byte('a' + i), '\n'})
		require.NoError(t, err)
	}
	for i := range 10 {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, string([]byte{byte('a' + i), '\n'}), line)
	}
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "no answer before a round trip")
}

// A cut link closes its connections and refuses new ones until healed.
func TestCutAndHeal(t *testing.T) {
	t.Parallel()
	p, err := linkproxy.Listen()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	p.SetTarget(echoServer(t))

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	echo := func(c net.Conn) error {
		if _, err := c.Write([]byte("x\n")); err != nil {
			return err
		}
		_, err := bufio.NewReader(c).ReadString('\n')
		return err
	}
	require.NoError(t, echo(c))
	p.Cut()
	require.Error(t, echo(c), "the connection was closed")
	refused, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err, "the listener still accepts")
	require.Error(t, echo(refused), "and closes at once")
	refused.Close()

	p.Heal()
	healed, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer healed.Close()
	require.NoError(t, echo(healed))
}
