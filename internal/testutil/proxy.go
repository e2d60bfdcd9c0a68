package testutil

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/linkproxy"
)

// Proxy forwards TCP connections to a target that can be set after it
// starts; it can cut the link and heal it, and make it long
// (linkproxy.Proxy).
type Proxy = linkproxy.Proxy

// NewProxy listens on a free loopback port until the test ends.
func NewProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := linkproxy.Listen()
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}
