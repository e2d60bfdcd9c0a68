package outbox_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"golang.org/x/crypto/bcrypt"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/outbox"
	"github.com/outpost-dev/outpost/internal/payloadcipher"
)

func hash(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	require.NoError(t, err)
	return string(h)
}

// users is the page with an operator (ana) and a viewer (vic).
func users(t *testing.T) outbox.Auth {
	return outbox.Auth{Users: map[string]outbox.User{
		"ana": {PasswordHash: hash(t, "ana-pass"), Role: outbox.RoleOperator},
		"vic": {PasswordHash: hash(t, "vic-pass"), Role: outbox.RoleViewer},
	}}
}

// signIn posts the login form and reports the status of the answer the
// browser ends on.
func signIn(t *testing.T, browser *http.Client, base, user, password string) (int, string) {
	t.Helper()
	resp, err := browser.PostForm(base+"/login", url.Values{"user": {user}, "password": {password}})
	require.NoError(t, err)
	return resp.StatusCode, readBody(t, resp)
}

func newBrowser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar}
}

// With users configured, nobody sees or acts without signing in; a viewer
// sees everything but cannot act; the operator recorded is the signed-in
// user, whatever the form says.
func TestSignInAndRoles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tc := &signals{}
	clock := f.now
	srv := httptest.NewServer(f.handlerWith(tc, func(o *outbox.Options) {
		o.Auth = users(t)
		o.Auth.SessionTTL = time.Hour
		o.Now = func() time.Time { return clock }
	}))
	t.Cleanup(srv.Close)
	retryURL := srv.URL + "/items/Notification/" + f.note + "/retry"

	anon := newBrowser(t)
	resp, err := anon.Get(srv.URL + "/")
	require.NoError(t, err)
	body := readBody(t, resp)
	require.Equal(t, "/login", resp.Request.URL.Path, "the page sends strangers to sign in")
	require.Contains(t, body, `id="sign-in"`)
	require.NotContains(t, body, "Pump 3")
	resp, err = anon.PostForm(retryURL, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	code, body := signIn(t, anon, srv.URL, "ana", "wrong")
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, body, "Wrong user name or password.")
	code, _ = signIn(t, anon, srv.URL, "mallory", "ana-pass")
	require.Equal(t, http.StatusUnauthorized, code, "an unknown user")

	viewer := newBrowser(t)
	code, body = signIn(t, viewer, srv.URL, "vic", "vic-pass")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "Signed in as <b>vic</b> (viewer)")
	require.Contains(t, body, "Pump 3", "a viewer sees the items")
	require.NotContains(t, body, `class="retry"`, "a viewer gets no Retry button")
	resp, err = viewer.PostForm(retryURL, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, readBody(t, resp), "vic is a viewer: retry, discard and changes to lists need the operator role")
	require.Empty(t, tc.all())

	operator := newBrowser(t)
	code, body = signIn(t, operator, srv.URL, "ana", "ana-pass")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `class="retry"`)
	require.NotContains(t, body, `name="operator"`, "the form has no operator field to type into")
	resp, err = operator.PostForm(retryURL, url.Values{"operator": {"mallory"}, "reason": {"relay fixed"}})
	require.NoError(t, err)
	require.Contains(t, readBody(t, resp), "as ana.")
	require.Equal(t, []signal{{contract.NotificationWorkflowID(f.note), contract.SignalRetry,
		contract.OperatorAction{Operator: "ana", Reason: "relay fixed"}}}, tc.all())

	// A forged or edited cookie is no session.
	forged := newBrowser(t)
	u, _ := url.Parse(srv.URL)
	for _, c := range operator.Jar.Cookies(u) {
		if c.Name == "outpost_outbox_session" {
			c.Value = strings.Replace(c.Value, c.Value[:4], "dmlj", 1) // "vic" in base64, MAC unchanged
			forged.Jar.SetCookies(u, []*http.Cookie{c})
		}
	}
	resp, err = forged.PostForm(retryURL, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// Sign-ins expire.
	clock = clock.Add(time.Hour)
	resp, err = operator.Get(srv.URL + "/")
	require.NoError(t, err)
	readBody(t, resp)
	require.Equal(t, "/login", resp.Request.URL.Path)

	// Signing out ends the session.
	clock = f.now
	signIn(t, operator, srv.URL, "ana", "ana-pass")
	resp, err = operator.PostForm(srv.URL+"/logout", nil)
	require.NoError(t, err)
	readBody(t, resp)
	require.Equal(t, "/login", resp.Request.URL.Path)
	resp, err = operator.PostForm(retryURL, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

// Behind an authenticating proxy the header names the user, but only on
// requests from the proxy's address.
func TestProxyHeaderTrustedOnlyFromProxy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tc := &signals{}
	h := f.handlerWith(tc, func(o *outbox.Options) {
		o.Auth = outbox.Auth{
			ProxyHeader: "X-Forwarded-User", ProxyOperators: []string{"bob"},
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")},
		}
	})
	request := func(method, target, from, user string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, nil)
		req.RemoteAddr = from + ":5000"
		if user != "" {
			req.Header.Set("X-Forwarded-User", user)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	retry := "/items/Notification/" + f.note + "/retry"

	rec := request(http.MethodGet, "/", "10.1.2.3", "bob")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "Signed in as <b>bob</b> (operator)")
	require.Contains(t, rec.Body.String(), `class="retry"`)
	require.NotContains(t, rec.Body.String(), `id="sign-out"`, "the proxy signs out, not the page")

	rec = request(http.MethodGet, "/", "10.1.2.3", "carol")
	require.Contains(t, rec.Body.String(), "Signed in as <b>carol</b> (viewer)")
	require.NotContains(t, rec.Body.String(), `class="retry"`)
	require.Equal(t, http.StatusForbidden, request(http.MethodPost, retry, "10.1.2.3", "carol").Code)

	rec = request(http.MethodGet, "/", "192.0.2.9", "bob")
	require.Equal(t, http.StatusUnauthorized, rec.Code, "the header from anywhere but the proxy is ignored")
	require.Contains(t, rec.Body.String(), "open it through the proxy")
	require.Equal(t, http.StatusUnauthorized, request(http.MethodPost, retry, "192.0.2.9", "bob").Code)
	require.Equal(t, http.StatusUnauthorized, request(http.MethodGet, "/", "10.1.2.3", "").Code, "no header, no user")
	require.Empty(t, tc.all())

	require.Equal(t, http.StatusSeeOther, request(http.MethodPost, retry, "10.1.2.3", "bob").Code)
	require.Equal(t, "bob", tc.all()[0].action.Operator)
}

// The codec server decodes for signed-in users, and answers the Web UI's
// origin (and no other) with credentials allowed.
func TestCodecServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := bytes.Repeat([]byte{7}, 32)
	c, err := payloadcipher.New([]payloadcipher.Key{{ID: "k1", Secret: key}})
	require.NoError(t, err)
	srv := httptest.NewServer(f.handlerWith(&signals{}, func(o *outbox.Options) {
		o.Auth = users(t)
		o.Codec = c
		o.CodecOrigins = []string{"http://127.0.0.1:8233"}
	}))
	t.Cleanup(srv.Close)
	encoded, err := c.Encode([]*commonpb.Payload{{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(`"secret body"`)}})
	require.NoError(t, err)
	require.NotContains(t, string(encoded[0].Data), "secret body")
	reqBody, err := json.Marshal(map[string]any{"payloads": encoded})
	require.NoError(t, err)
	decode := func(browser *http.Client, origin string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/codec/decode", bytes.NewReader(reqBody))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Namespace", "default")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := browser.Do(req)
		require.NoError(t, err)
		return resp
	}

	resp := decode(newBrowser(t), "http://127.0.0.1:8233")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "not signed in")
	readBody(t, resp)

	viewer := newBrowser(t)
	signIn(t, viewer, srv.URL, "vic", "vic-pass")
	resp = decode(viewer, "http://127.0.0.1:8233")
	body := readBody(t, resp)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "InNlY3JldCBib2R5Ig", `the base64 of "secret body" in quotes`)
	require.Equal(t, "http://127.0.0.1:8233", resp.Header.Get("Access-Control-Allow-Origin"))
	require.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))

	resp = decode(viewer, "https://evil.example")
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, readBody(t, resp), "not in central.codec_origins")

	pre, err := http.NewRequest(http.MethodOptions, srv.URL+"/codec/decode", nil)
	require.NoError(t, err)
	pre.Header.Set("Origin", "http://127.0.0.1:8233")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	resp, err = http.DefaultClient.Do(pre)
	require.NoError(t, err)
	readBody(t, resp)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace")

	plain := httptest.NewServer(f.handler(&signals{}))
	t.Cleanup(plain.Close)
	resp, err = http.Post(plain.URL+"/codec/decode", "application/json", bytes.NewReader(reqBody))
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, readBody(t, resp), "payload encryption is off")
}

func TestNewRefusesBadAuth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, c := range []struct {
		auth outbox.Auth
		want string
	}{
		{outbox.Auth{Users: map[string]outbox.User{"ana": {PasswordHash: "plain-text", Role: outbox.RoleOperator}}}, `user "ana": password_hash is not a bcrypt hash`},
		{outbox.Auth{Users: map[string]outbox.User{"ana": {PasswordHash: hash(t, "x"), Role: "admin"}}}, `user "ana": role "admin": want operator or viewer`},
	} {
		_, err := outbox.New(f.store, &signals{}, outbox.Options{Auth: c.auth})
		require.ErrorContains(t, err, c.want)
	}
}
