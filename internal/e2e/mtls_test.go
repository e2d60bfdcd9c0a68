package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/certgen"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
)

// Temporal behind a TLS-terminating proxy that demands client certificates
// (the dev server has no TLS of its own): the site and central connect
// through it with temporal.tls_* and deliver; a client certificate from
// another CA is refused with an error that says so.
func TestTemporalMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, "outpost test CA")
	other := newCA(t, "someone else's CA")
	serverCert := ca.issue(t, "temporal.test", []string{"temporal.test"}, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := ca.writePair(t, dir, "client", ca.issue(t, "outpost", nil, x509.ExtKeyUsageClientAuth))
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.certPEM, 0o600))

	var proxy *tlsProxy
	s := newStack(t, func(c *config.Config) {
		proxy = startTLSProxy(t, c.Temporal.Address, serverCert, ca.pool())
		c.Temporal.Address = proxy.addr
		c.Temporal.TLSCertFile, c.Temporal.TLSKeyFile = clientCert, clientKey
		c.Temporal.TLSCAFile, c.Temporal.TLSServerName = caFile, "temporal.test"
	})
	id := s.notify("ops", "through mutual TLS")
	s.waitStatus(contract.StatusDelivered, time.Minute, id)
	require.Equal(t, 1, s.received()[id])
	require.Positive(t, proxy.handshakes(), "the clients went through the proxy")

	wrong := s.cfg.Temporal
	wrong.TLSCertFile, wrong.TLSKeyFile = other.writePair(t, dir, "wrong", other.issue(t, "mallory", nil, x509.ExtKeyUsageClientAuth))
	_, err := fromconfig.DialTemporal(wrong, zaptest.NewLogger(t), nil, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "connect to temporal at "+proxy.addr)
	require.Contains(t, err.Error(), "TLS with client certificate "+wrong.TLSCertFile)
	// Whether the server's alert ("unknown certificate authority") or a
	// broken pipe comes back is a race in TLS 1.3; the context above is not.

	noCert := s.cfg.Temporal
	noCert.TLSCertFile, noCert.TLSKeyFile = "", ""
	_, err = fromconfig.DialTemporal(noCert, zaptest.NewLogger(t), nil, nil)
	require.ErrorContains(t, err, "TLS without a client certificate")
}

// testCA signs certificates for a test.
type testCA struct {
	*certgen.CA
	certPEM []byte
}

func newCA(t *testing.T, name string) testCA {
	t.Helper()
	ca, err := certgen.NewCA(name, 24*time.Hour)
	require.NoError(t, err)
	return testCA{CA: ca, certPEM: ca.PEM}
}

func (ca testCA) pool() *x509.CertPool { return ca.Pool() }

// issue signs a certificate for name (DNS names dns) with usage.
func (ca testCA) issue(t *testing.T, name string, dns []string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	c, err := ca.Issue(certgen.Subject{Name: name, DNS: dns, Usage: []x509.ExtKeyUsage{usage}}, 24*time.Hour)
	require.NoError(t, err)
	return c
}

// writePair writes a certificate and its key as PEM files.
func (ca testCA) writePair(t *testing.T, dir, name string, c tls.Certificate) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile, err := certgen.WritePair(dir, name, c)
	require.NoError(t, err)
	return certFile, keyFile
}

// tlsProxy terminates TLS, requiring a client certificate from its CA, and
// forwards the plain bytes (gRPC over HTTP/2) to the dev server.
type tlsProxy struct {
	addr string
	mu   sync.Mutex
	ok   int
}

func startTLSProxy(t *testing.T, backend string, cert tls.Certificate, clientCAs *x509.CertPool) *tlsProxy {
	t.Helper()
	p := &tlsProxy{}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clientCAs,
		NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12,
	})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	p.addr = ln.Addr().String()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(conn.(*tls.Conn), backend)
		}
	}()
	return p
}

func (p *tlsProxy) forward(conn *tls.Conn, backend string) {
	defer conn.Close()
	if err := conn.Handshake(); err != nil {
		return
	}
	p.mu.Lock()
	p.ok++
	p.mu.Unlock()
	up, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}

func (p *tlsProxy) handshakes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok
}
