package httpserve

import (
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testutil"
)

// A server on Certificates serves HTTPS, and a certificate renewed on disk
// is served from the next handshake on, without a restart; a half-written
// renewal keeps the last good pair.
func TestCertificatesReloadWhenTheFilesChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "site.crt"), filepath.Join(dir, "site.key")
	testutil.WriteSelfSigned(t, certFile, keyFile, "first")
	certs, err := NewCertificates(certFile, keyFile)
	require.NoError(t, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := Server(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLSConfig = certs.TLSConfig()
	go srv.ServeTLS(ln, "", "") //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })

	served := func() string {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the served certificate
		require.NoError(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	require.Equal(t, "first", served())

	later := time.Now().Add(time.Second)
	testutil.WriteSelfSigned(t, certFile, keyFile, "renewed")
	require.NoError(t, os.Chtimes(certFile, later, later))
	require.NoError(t, os.Chtimes(keyFile, later, later))
	require.Equal(t, "renewed", served())

	require.NoError(t, os.WriteFile(keyFile, []byte("half written"), 0o600))
	evenLater := later.Add(time.Second)
	require.NoError(t, os.Chtimes(keyFile, evenLater, evenLater))
	require.Equal(t, "renewed", served(), "the last good pair while the renewal is incomplete")

	_, err = NewCertificates(certFile, filepath.Join(dir, "missing.key"))
	require.ErrorContains(t, err, "site api tls: load")
}
