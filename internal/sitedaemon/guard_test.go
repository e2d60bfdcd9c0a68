package sitedaemon

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/internal/testutil"
)

// Requests a web page can make are refused before anything is stored; what
// a script or tool sends is served. A real browser's attempt is in
// internal/e2e (TestBrowserCannotUseSiteAPI).
func TestAPIRefusesWhatAWebPageCanSend(t *testing.T) {
	t.Parallel()
	c := newTestClient(t)
	h := NewAPI(c, APIOptions{Hosts: []string{"plant-1-edge.local"}}, zaptest.NewLogger(t))
	const note = `{"list":"ops","subject":"s"}`
	withHeaders := func(host string, headers ...string) *http.Request {
		r := apiRequest(http.MethodPost, "/v1/notifications", note)
		if host != "" {
			r.Host = host
		}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Set(headers[i], headers[i+1])
		}
		return r
	}
	refused := []struct {
		name     string
		req      *http.Request
		status   int
		mentions string
	}{
		{"text/plain form", withHeaders("", "Content-Type", "text/plain"), 415, `Content-Type "text/plain" refused`},
		{"urlencoded form", withHeaders("", "Content-Type", "application/x-www-form-urlencoded"), 415, "Content-Type: application/json"},
		{"no content type", withHeaders("", "Content-Type", ""), 415, "refused"},
		{"cross-site fetch", withHeaders("", "Sec-Fetch-Site", "cross-site"), 403, "cross-site request refused"},
		{"same-site other port", withHeaders("", "Sec-Fetch-Site", "same-site"), 403, "cross-site request refused"},
		{"foreign origin", withHeaders("", "Origin", "https://evil.example"), 403, "cross-site request refused"},
		{"null origin", withHeaders("", "Origin", "null"), 403, "cross-site request refused"},
		{"rebound DNS name", withHeaders("evil.example:8480"), 421, `host "evil.example:8480" is not a name of this site API`},
		{"empty host", withHeaders(" "), 421, "is not a name"},
	}
	for _, tc := range refused {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, tc.req)
		require.Equal(t, tc.status, rec.Code, tc.name)
		var e ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), tc.name)
		require.Contains(t, e.Error, tc.mentions, tc.name)
	}
	depth, err := c.BufferDepth(t.Context())
	require.NoError(t, err)
	require.Zero(t, depth, "nothing refused was buffered")

	served := []struct {
		name string
		req  *http.Request
	}{
		{"script", withHeaders("")},
		{"json with charset", withHeaders("", "Content-Type", "application/json; charset=utf-8")},
		{"localhost", withHeaders("localhost:8480")},
		{"ipv6 loopback", withHeaders("[::1]:8480")},
		{"LAN address", withHeaders("192.0.2.10:8480")},
		{"configured name", withHeaders("PLANT-1-EDGE.local:8480")},
		{"typed into the address bar", withHeaders("", "Sec-Fetch-Site", "none")},
		{"same origin", withHeaders("127.0.0.1:8480", "Origin", "http://127.0.0.1:8480")},
	}
	for _, tc := range served {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, tc.req)
		require.Equal(t, http.StatusAccepted, rec.Code, "%s: %s", tc.name, rec.Body.String())
	}
	depth, err = c.BufferDepth(t.Context())
	require.NoError(t, err)
	require.Equal(t, len(served), depth)
}

// With tokens configured, /v1/* asks for one: none or a wrong one is 401
// with a WWW-Authenticate challenge, and either of two tokens (one being
// rotated out) is served.
func TestAPIAsksForAToken(t *testing.T) {
	t.Parallel()
	c := newTestClient(t)
	h := NewAPI(c, APIOptions{Tokens: map[string]string{"scripts": "s3cret-a", "scada": "s3cret-b"}}, zaptest.NewLogger(t))
	send := func(auth string) *httptest.ResponseRecorder {
		r := apiRequest(http.MethodPost, "/v1/notifications", `{"list":"ops","subject":"s"}`)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	for auth, challenge := range map[string]string{
		"":                  `Bearer realm="outpost-site"`,
		"Bearer wrong":      `Bearer realm="outpost-site", error="invalid_token"`,
		"Bearer s3cret-a-x": `Bearer realm="outpost-site", error="invalid_token"`,
		"Basic s3cret-a":    `Bearer realm="outpost-site"`,
	} {
		rec := send(auth)
		require.Equal(t, http.StatusUnauthorized, rec.Code, auth)
		require.Equal(t, challenge, rec.Header().Get("WWW-Authenticate"), auth)
		require.Contains(t, rec.Body.String(), "site.api_tokens", auth)
	}
	depth, err := c.BufferDepth(t.Context())
	require.NoError(t, err)
	require.Zero(t, depth, "nothing refused was buffered")
	for _, auth := range []string{"Bearer s3cret-a", "Bearer s3cret-b"} {
		require.Equal(t, http.StatusAccepted, send(auth).Code, auth)
	}
}

// A daemon listening beyond loopback refuses to start without a token; with
// one, the API asks for it while the probes stay open, and /metrics asks
// only when metrics_need_token is set.
func TestDaemonBeyondLoopbackNeedsAToken(t *testing.T) {
	var failWith atomic.Int32
	cfg := daemonSiteConfig(t, &failWith)
	cfg.Listen = "0.0.0.0:0"
	_, err := StartDaemon(t.Context(), cfg, nil, nil, zaptest.NewLogger(t))
	require.ErrorContains(t, err, `site.listen "0.0.0.0:0" is reachable beyond this host: name a token in site.api_tokens`)

	cfg.APITokens = map[string]string{"scripts": "OUTPOST_TEST_SITE_TOKEN"}
	_, err = StartDaemon(t.Context(), cfg, nil, nil, zaptest.NewLogger(t))
	require.ErrorContains(t, err, "site.api_tokens.scripts: $OUTPOST_TEST_SITE_TOKEN is not set")

	t.Setenv("OUTPOST_TEST_SITE_TOKEN", "t0ken")
	cfg.MetricsNeedToken = true
	d, _ := startDaemonCentralDown(t, cfg)
	base := "http://127.0.0.1:" + strings.TrimPrefix(d.Addr(), "[::]:")
	get := func(path, token string) int {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	const unknown = "/v1/operations/343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11"
	require.Equal(t, http.StatusUnauthorized, get(unknown, ""))
	require.Equal(t, http.StatusNotFound, get(unknown, "t0ken"))
	require.Equal(t, http.StatusUnauthorized, get("/metrics", ""))
	require.Equal(t, http.StatusOK, get("/metrics", "t0ken"))
	require.Equal(t, http.StatusOK, get("/healthz", ""))
}

// With a certificate configured the daemon serves HTTPS only.
func TestDaemonServesTLS(t *testing.T) {
	t.Parallel()
	var failWith atomic.Int32
	cfg := daemonSiteConfig(t, &failWith)
	dir := t.TempDir()
	cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(dir, "site.crt"), filepath.Join(dir, "site.key")
	testutil.WriteSelfSigned(t, cfg.TLSCertFile, cfg.TLSKeyFile, "plant-1")
	d, _ := startDaemonCentralDown(t, cfg)

	pool := x509.NewCertPool()
	pem, err := os.ReadFile(cfg.TLSCertFile)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(pem))
	httpsClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := httpsClient.Get("https://" + d.Addr() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get("http://" + d.Addr() + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP gets Go's 'client sent an HTTP request to an HTTPS server'")
}
