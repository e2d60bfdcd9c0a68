package demosystem_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/demosystem"
)

// client has a timeout so a hung server fails the test instead of stalling it.
var client = &http.Client{Timeout: 10 * time.Second}

func start(t *testing.T) *demosystem.System {
	t.Helper()
	sys, err := demosystem.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sys.Close() })
	return sys
}

// call sends body (none when empty) and returns the status and the response body.
func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Outpost-Call", "call-1")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func statuses(reqs []demosystem.Request) []int {
	out := make([]int, len(reqs))
	for i, r := range reqs {
		out[i] = r.Status
	}
	return out
}

func TestRecordsRequestWithBody(t *testing.T) {
	t.Parallel()
	sys := start(t)
	before := time.Now()

	status, body := call(t, http.MethodPut, sys.URL()+"/api/orders/42?dry=1", `{"qty": 3}`)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"ok": true, "method": "PUT", "path": "/orders/42", "received": {"qty": 3}, "id": 1}`, body)

	status, body = call(t, http.MethodGet, sys.URL()+"/api/orders", "")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{"ok": true, "method": "GET", "path": "/orders", "received": null, "id": 2}`, body)

	reqs := sys.Requests()
	require.Len(t, reqs, 2)
	first := reqs[0]
	require.Equal(t, 1, first.ID)
	require.Equal(t, http.MethodPut, first.Method)
	require.Equal(t, "/orders/42", first.Path)
	require.Equal(t, "dry=1", first.Query)
	require.JSONEq(t, `{"qty": 3}`, string(first.Body))
	require.Equal(t, "call-1", first.Header.Get("X-Outpost-Call"))
	require.Equal(t, http.StatusOK, first.Status)
	require.False(t, first.At.Before(before))
	require.Nil(t, reqs[1].Body)
}

func TestRequestsIsACopy(t *testing.T) {
	t.Parallel()
	sys := start(t)
	call(t, http.MethodPost, sys.URL()+"/api/orders", `{"qty": 3}`)

	reqs := sys.Requests()
	reqs[0].Header.Set("X-Outpost-Call", "changed")
	reqs[0].Body[0] = ' '

	again := sys.Requests()[0]
	require.Equal(t, "call-1", again.Header.Get("X-Outpost-Call"))
	require.JSONEq(t, `{"qty": 3}`, string(again.Body))
}

func TestRefusesBodyThatIsNotJSON(t *testing.T) {
	t.Parallel()
	sys := start(t)

	status, body := call(t, http.MethodPost, sys.URL()+"/api/orders", `qty=3`)
	require.Equal(t, http.StatusBadRequest, status)
	require.JSONEq(t, `{"error": "body is not JSON"}`, body)
	require.Equal(t, []int{http.StatusBadRequest}, statuses(sys.Requests()))
}

func TestFailNextFailsExactlyN(t *testing.T) {
	t.Parallel()
	sys := start(t)
	sys.FailNext(2, http.StatusServiceUnavailable)

	for range 2 {
		status, body := call(t, http.MethodPost, sys.URL()+"/api/orders", `{"qty": 3}`)
		require.Equal(t, http.StatusServiceUnavailable, status)
		var e map[string]string
		require.NoError(t, json.Unmarshal([]byte(body), &e))
		require.Contains(t, e["error"], "503")
	}
	status, _ := call(t, http.MethodPost, sys.URL()+"/api/orders", `{"qty": 3}`)
	require.Equal(t, http.StatusOK, status)

	reqs := sys.Requests()
	require.Equal(t, []int{503, 503, 200}, statuses(reqs))
	require.JSONEq(t, `{"qty": 3}`, string(reqs[0].Body), "failed attempts keep their body")
}

func TestFailNextCountsConcurrentRequestsOnce(t *testing.T) {
	t.Parallel()
	sys := start(t)
	sys.FailNext(5, http.StatusTooManyRequests)

	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { call(t, http.MethodPost, sys.URL()+"/api/orders", `{}`) })
	}
	wg.Wait()

	failed := 0
	for i, r := range sys.Requests() {
		require.Equal(t, i+1, r.ID)
		if r.Status == http.StatusTooManyRequests {
			failed++
		}
	}
	require.Equal(t, 5, failed)
}

func TestFailUntilRecover(t *testing.T) {
	t.Parallel()
	sys := start(t)
	sys.FailNext(-1, http.StatusInternalServerError)

	for range 5 {
		status, _ := call(t, http.MethodGet, sys.URL()+"/api/orders/42", "")
		require.Equal(t, http.StatusInternalServerError, status)
	}
	sys.Recover()
	status, _ := call(t, http.MethodGet, sys.URL()+"/api/orders/42", "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, []int{500, 500, 500, 500, 500, 200}, statuses(sys.Requests()))
}

func TestFailNextPanicsOnSuccessStatus(t *testing.T) {
	t.Parallel()
	sys := start(t)
	require.Panics(t, func() { sys.FailNext(1, http.StatusOK) })
}

func TestControlEndpoints(t *testing.T) {
	t.Parallel()
	sys := start(t)
	api := sys.URL() + "/api/orders"

	status, body := call(t, http.MethodPost, sys.URL()+"/control/fail?n=1&status=429", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "the next API request answers 429")
	status, _ = call(t, http.MethodPost, api, "")
	require.Equal(t, http.StatusTooManyRequests, status)
	status, _ = call(t, http.MethodPost, api, "")
	require.Equal(t, http.StatusOK, status)

	// Defaults: every request answers 503 until recover.
	status, body = call(t, http.MethodPost, sys.URL()+"/control/fail", "")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "every API request answers 503 until recover")
	for range 3 {
		status, _ = call(t, http.MethodPost, api, "")
		require.Equal(t, http.StatusServiceUnavailable, status)
	}
	status, _ = call(t, http.MethodPost, sys.URL()+"/control/recover", "")
	require.Equal(t, http.StatusOK, status)
	status, _ = call(t, http.MethodPost, api, "")
	require.Equal(t, http.StatusOK, status)

	require.Equal(t, []int{429, 200, 503, 503, 503, 200}, statuses(sys.Requests()), "control requests are not recorded")
}

func TestControlFailRejectsBadParameters(t *testing.T) {
	t.Parallel()
	sys := start(t)
	for query, want := range map[string]string{
		"n=three":    "n:",
		"n=1.5":      "n:",
		"status=abc": "status:",
		"status=200": "status:",
		"status=999": "status:",
	} {
		status, body := call(t, http.MethodPost, sys.URL()+"/control/fail?"+query, "")
		require.Equal(t, http.StatusBadRequest, status, query)
		require.True(t, strings.HasPrefix(body, want), "%s: %s", query, body)
	}
	status, _ := call(t, http.MethodGet, sys.URL()+"/control/fail", "")
	require.Equal(t, http.StatusMethodNotAllowed, status)

	status, _ = call(t, http.MethodPost, sys.URL()+"/api/orders", "")
	require.Equal(t, http.StatusOK, status, "a rejected command changes nothing")
}

func TestRequestsEndpointListsRequestsAsJSON(t *testing.T) {
	t.Parallel()
	sys := start(t)

	status, body := call(t, http.MethodGet, sys.URL()+"/requests", "")
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `[]`, body)

	sys.FailNext(1, http.StatusBadGateway)
	call(t, http.MethodPost, sys.URL()+"/api/orders/7", `{"qty": 1}`)
	call(t, http.MethodDelete, sys.URL()+"/api/orders/7", "")

	status, body = call(t, http.MethodGet, sys.URL()+"/requests", "")
	require.Equal(t, http.StatusOK, status)
	want, err := json.Marshal(sys.Requests())
	require.NoError(t, err)
	require.JSONEq(t, string(want), body)
	var got []map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Len(t, got, 2)
	require.Equal(t, "/orders/7", got[0]["path"])
	require.Equal(t, map[string]any{"qty": 1.0}, got[0]["body"])
	require.Equal(t, 502.0, got[0]["status"])
	require.Equal(t, "DELETE", got[1]["method"])
	require.Nil(t, got[1]["body"])
}

func TestCloseRefusesConnections(t *testing.T) {
	t.Parallel()
	sys := start(t)
	status, _ := call(t, http.MethodPost, sys.URL()+"/api/orders", `{}`)
	require.Equal(t, http.StatusOK, status)

	require.NoError(t, sys.Close())
	// A fresh transport: the point is a new connection, not a pooled one the server dropped.
	fresh := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	_, err := fresh.Post(sys.URL()+"/api/orders", "application/json", strings.NewReader(`{}`))
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
}

func TestPageShowsRequestsEscaped(t *testing.T) {
	t.Parallel()
	sys := start(t)
	call(t, http.MethodPost, sys.URL()+"/api/<script>alert(1)</script>", `{}`)
	sys.FailNext(3, http.StatusServiceUnavailable)

	resp, err := client.Get(sys.URL() + "/")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	page := string(b)

	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Contains(t, page, "/&lt;script&gt;alert(1)&lt;/script&gt;")
	require.NotContains(t, page, "<script>")
	require.Contains(t, page, "the next 3 API requests answer 503")
	require.Contains(t, page, sys.URL()+"/control/recover")
}
