package outbox_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/outbox"
)

// A DNS-rebinding page reaches an open page on loopback under its own name,
// and a browser then calls its requests same-origin: the page answers only
// the names it serves (localhost, IP addresses, Options.Hosts) and refuses
// every other Host with 421 before it reads or changes anything.
func TestPageAnswersOnlyItsHostNames(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, f.store.PutList(ctx, centralstore.List{Name: "ops", Type: contract.NotificationTypeEmail,
		Targets: []string{"ops@example.com"}, TypeData: "{}", UpdatedBy: "seed"}, "created"))
	tc := &signals{}
	srv := httptest.NewServer(f.handlerWith(tc, func(o *outbox.Options) { o.Hosts = []string{"outbox.plant.example"} }))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)

	rebound := func(method, path string, form url.Values) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Host = "evil.example:" + port
		req.Header.Set("Origin", "http://evil.example:"+port)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := http.DefaultTransport.RoundTrip(req) // no redirects followed
		require.NoError(t, err)
		return resp
	}
	for _, tc := range []struct {
		method, path string
		form         url.Values
	}{
		{http.MethodPost, "/items/Notification/" + f.note + "/discard", url.Values{"reason": {"gone"}}},
		{http.MethodPost, "/lists", url.Values{"name": {"ops"}, "type": {"Email"}, "type_data": {"{}"}, "targets": {"attacker@evil.example"}}},
		{http.MethodGet, "/", nil},
		{http.MethodGet, "/items/Notification/" + f.note, nil},
		{http.MethodPost, "/codec/decode", nil},
	} {
		resp := rebound(tc.method, tc.path, tc.form)
		body := readBody(t, resp)
		require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "%s %s: %s", tc.method, tc.path, body)
		require.Contains(t, body, `host "evil.example:`+port+`" is not a name of this page`, tc.path)
		require.NotContains(t, body, "Pump 3", tc.path)
	}
	require.Empty(t, tc.all(), "no signal was sent")
	l, err := f.store.GetList(ctx, "ops")
	require.NoError(t, err)
	require.Equal(t, []string{"ops@example.com"}, l.Targets, "the list is unchanged")

	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "OUTBOX.plant.example:" + port, "outbox.plant.example."} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body := readBody(t, resp)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", host, body)
	}
}
