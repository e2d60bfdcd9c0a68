package site

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
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
