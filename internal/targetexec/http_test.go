package targetexec

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/targets"
)

// seen is what a test server received.
type seen struct {
	Method, EscapedPath, RawQuery, ContentType, Auth string
	Body                                             []byte
}

// recorder is an httptest server that records its last request and answers
// with status and body.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	last seen
}

func newRecorder(t *testing.T, status int, body string) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.last = seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("X-Api-Key"), b}
		rec.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) seen() seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.last
}

func httpExecutor(t *testing.T, sys targets.ExternalSystem) *Executor {
	t.Helper()
	if sys.Timeout == 0 {
		sys.Timeout = 5 * time.Second
	}
	r := newExecutor(map[string]targets.ExternalSystem{"erp": sys}, nil)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	return r
}

func TestCallPathEscapingAndJSONBody(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusCreated, `{"ok": true}`)
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: rec.URL + "/api/", Methods: map[string]targets.Method{
		"addLine": {Verb: "POST", Path: "/orders/{id}/lines/{line}"},
	}})
	res, err := r.Execute(t.Context(), call("erp", "addLine", map[string]any{
		"id": "A/7 x?", "line": 3, "qty": 2, "note": "rush",
	}))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, res.HTTPStatus)
	require.JSONEq(t, `{"ok":true}`, string(res.Body))

	got := rec.seen()
	require.Equal(t, "POST", got.Method)
	require.Equal(t, "/api/orders/A%2F7%20x%3F/lines/3", got.EscapedPath)
	require.Empty(t, got.RawQuery)
	require.Equal(t, "application/json", got.ContentType)
	// Path parameters are not sent again.
	require.JSONEq(t, `{"qty":2,"note":"rush"}`, string(got.Body))
}

func TestCallGETSendsQuery(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK, `[1,2]`)
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: rec.URL, Methods: map[string]targets.Method{
		"find": {Verb: "GET", Path: "/orders/{id}"},
	}})
	_, err := r.Execute(t.Context(), call("erp", "find", map[string]any{
		"id": 12, "status": "open & new", "limit": 5, "ratio": 0.5, "all": true,
	}))
	require.NoError(t, err)
	got := rec.seen()
	require.Equal(t, "GET", got.Method)
	require.Equal(t, "/orders/12", got.EscapedPath)
	require.Equal(t, "all=true&limit=5&ratio=0.5&status=open+%26+new", got.RawQuery)
	require.Empty(t, got.Body)
	require.Empty(t, got.ContentType)
}

func TestCallDefaultVerbIsPOSTWithEmptyObject(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusNoContent, "")
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: rec.URL, Methods: map[string]targets.Method{"ping": {Path: "ping"}}})
	res, err := r.Execute(t.Context(), call("erp", "ping", nil))
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, res.HTTPStatus)
	require.Nil(t, res.Body)
	got := rec.seen()
	require.Equal(t, "POST", got.Method)
	require.Equal(t, "/ping", got.EscapedPath)
	require.JSONEq(t, `{}`, string(got.Body))
}

func TestCallNonJSONBodyBecomesString(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusOK, "accepted <b>7</b>")
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: rec.URL, Methods: map[string]targets.Method{"m": {}}})
	res, err := r.Execute(t.Context(), call("erp", "m", nil))
	require.NoError(t, err)
	var s string
	require.NoError(t, json.Unmarshal(res.Body, &s))
	require.Equal(t, "accepted <b>7</b>", s)
}

func TestCallHugeBodyIsCutToString(t *testing.T) {
	t.Parallel()
	big := `["` + strings.Repeat("x", maxBody) + `"]`
	rec := newRecorder(t, http.StatusOK, big)
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: rec.URL, Methods: map[string]targets.Method{"m": {}}})
	res, err := r.Execute(t.Context(), call("erp", "m", nil))
	require.NoError(t, err)
	var s string
	require.NoError(t, json.Unmarshal(res.Body, &s))
	require.Equal(t, big[:maxBody], s)
}

func TestCallStatusClassification(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"error":"no such order"}`)
	}))
	t.Cleanup(srv.Close)
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: srv.URL, Methods: map[string]targets.Method{
		"status": {Verb: "GET", Path: "/status/{code}"},
	}})
	for _, tt := range []struct {
		code      int
		permanent bool
	}{
		{400, true}, {401, true}, {404, true}, {409, true}, {422, true},
		{408, false}, {429, false}, {500, false}, {502, false}, {503, false},
	} {
		t.Run(strconv.Itoa(tt.code), func(t *testing.T) {
			t.Parallel()
			_, err := r.Execute(t.Context(), call("erp", "status", map[string]any{"code": tt.code}))
			var f *targets.Failure
			require.ErrorAs(t, err, &f)
			require.Equal(t, tt.permanent, f.Permanent)
			require.Equal(t, tt.code, f.Code)
			want := fmt.Sprintf("HTTP %d %s: {\"error\":\"no such order\"}", tt.code, http.StatusText(tt.code))
			require.Equal(t, want, f.Message)
			require.Equal(t, want, f.Error())
		})
	}
}

func TestCallErrorBodyExcerptIsShort(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, http.StatusBadRequest, strings.Repeat("é", 2000))
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: rec.URL, Methods: map[string]targets.Method{"m": {}}})
	_, err := r.Execute(t.Context(), call("erp", "m", nil))
	var f *targets.Failure
	require.ErrorAs(t, err, &f)
	ex := strings.TrimSuffix(strings.TrimPrefix(f.Message, "HTTP 400 Bad Request: "), "...")
	require.LessOrEqual(t, len(ex), maxExcerpt)
	require.Equal(t, strings.Repeat("é", maxExcerpt/2), ex) // cut on a rune boundary
}

func TestCallConnectionRefusedIsTransient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: srv.URL, Methods: map[string]targets.Method{"m": {}}})
	_, err := r.Execute(t.Context(), call("erp", "m", nil))
	var f *targets.Failure
	require.ErrorAs(t, err, &f)
	require.False(t, f.Permanent)
	require.Zero(t, f.Code)
	require.Contains(t, f.Message, "connection refused")
	require.NotNil(t, f.Unwrap())
}

func TestCallTimeoutIsTransient(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: the handler returns before Close waits for it
	r := httpExecutor(t, targets.ExternalSystem{BaseURL: srv.URL, Timeout: 200 * time.Millisecond, Methods: map[string]targets.Method{"m": {}}})
	_, err := r.Execute(t.Context(), call("erp", "m", nil))
	var f *targets.Failure
	require.ErrorAs(t, err, &f)
	require.False(t, f.Permanent)
	require.Zero(t, f.Code)
	require.Contains(t, f.Message, "no response within 200ms")
}

// TestCallAuth sets an environment variable, so it cannot run in parallel.
func TestCallAuth(t *testing.T) {
	const secret = "Bearer s3cr3t-token-value"
	t.Setenv("OUTPOST_TEST_ERP_KEY", secret)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			// A careless server echoing the credential it was given.
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, "key %q is not valid; token %s", r.Header.Get("X-Api-Key"), strings.TrimPrefix(r.Header.Get("X-Api-Key"), "Bearer "))
			return
		}
		fmt.Fprintf(w, `{"key":%q}`, r.Header.Get("X-Api-Key"))
	}))
	t.Cleanup(echo.Close)
	refused := httptest.NewServer(http.NotFoundHandler())
	refused.Close()
	methods := map[string]targets.Method{"ok": {Path: "/ok"}, "bad": {Path: "/bad"}}
	r := newExecutor(map[string]targets.ExternalSystem{
		"erp":  {BaseURL: echo.URL, Methods: methods, Timeout: 5 * time.Second, AuthHeader: "X-Api-Key", AuthEnv: "OUTPOST_TEST_ERP_KEY"},
		"down": {BaseURL: refused.URL, Methods: methods, Timeout: 5 * time.Second, AuthHeader: "X-Api-Key", AuthEnv: "OUTPOST_TEST_ERP_KEY"},
	}, nil)
	t.Cleanup(func() { require.NoError(t, r.Close()) })

	res, err := r.Execute(t.Context(), call("erp", "ok", nil))
	require.NoError(t, err)
	require.JSONEq(t, `{"key":"`+secret+`"}`, string(res.Body))

	_, err = r.Execute(t.Context(), call("erp", "bad", nil))
	var f *targets.Failure
	require.ErrorAs(t, err, &f)
	require.True(t, f.Permanent)
	require.NotContains(t, f.Error(), "s3cr3t-token-value")
	require.Contains(t, f.Error(), "[redacted]")

	_, err = r.Execute(t.Context(), call("down", "ok", nil))
	require.ErrorAs(t, err, &f)
	require.NotContains(t, f.Error(), "s3cr3t-token-value")
}

// TestRedirectDropsAuthAcrossHosts sets an environment variable, so it
// cannot run in parallel.
func TestRedirectDropsAuthAcrossHosts(t *testing.T) {
	t.Setenv("OUTPOST_TEST_REDIRECT_KEY", "k-123456789")
	other := newRecorder(t, http.StatusOK, `{}`)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/landed", http.StatusFound)
	}))
	t.Cleanup(origin.Close)
	r := httpExecutor(t, targets.ExternalSystem{
		BaseURL: origin.URL, Methods: map[string]targets.Method{"m": {Verb: "GET"}},
		AuthHeader: "X-Api-Key", AuthEnv: "OUTPOST_TEST_REDIRECT_KEY",
	})
	_, err := r.Execute(t.Context(), call("erp", "m", nil))
	require.NoError(t, err)
	got := other.seen()
	require.Equal(t, "/landed", got.EscapedPath)
	require.Empty(t, got.Auth)
}

// A 429 or 503 carries its Retry-After, in seconds or as a date; other
// statuses and unreadable values carry none.
func TestCallReadsRetryAfter(t *testing.T) {
	t.Parallel()
	var status atomic.Int32
	var header atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", header.Load().(string))
		w.WriteHeader(int(status.Load()))
	}))
	t.Cleanup(srv.Close)
	r := newExecutor(map[string]targets.ExternalSystem{"erp": {BaseURL: srv.URL, Timeout: time.Second,
		Methods: map[string]targets.Method{"createOrder": {Verb: "POST", Path: "/orders"}}}}, nil)
	t.Cleanup(func() { r.Close() })
	inTwoMinutes := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		status   int
		header   string
		min, max time.Duration
	}{
		{429, "120", 120 * time.Second, 120 * time.Second},
		{503, inTwoMinutes, 110 * time.Second, 120 * time.Second},
		{500, "120", 0, 0},
		{429, "soon", 0, 0},
		{429, "-5", 0, 0},
	} {
		status.Store(int32(tc.status))
		header.Store(tc.header)
		_, err := r.Execute(t.Context(), targets.Request{Kind: contract.KindExternalCall, System: "erp", Method: "createOrder"})
		var f *targets.Failure
		require.ErrorAs(t, err, &f)
		require.GreaterOrEqual(t, f.RetryAfter, tc.min, "%d %q", tc.status, tc.header)
		require.LessOrEqual(t, f.RetryAfter, tc.max, "%d %q", tc.status, tc.header)
	}
}
