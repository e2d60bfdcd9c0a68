package sitedaemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/site"
)

// newTestClient is a notifications-only client of a fresh store.
func newTestClient(t *testing.T) *site.Client {
	c, _ := openClient(t, site.Options{SiteID: "plant-1", Node: "node-a", MaxBodyBytes: 1024})
	return c
}

// openClient is a notifications-only client of a fresh store, and the
// store, the way the daemon holds both.
func openClient(t *testing.T, opts site.Options) (*site.Client, *sitestore.Store) {
	t.Helper()
	store, err := sitestore.Open(context.Background(), filepath.Join(t.TempDir(), "site.db"), sitestore.Options{})
	require.NoError(t, err)
	c := site.New(store, nil, nil, opts)
	t.Cleanup(func() { c.Close() })
	return c, store
}

func post(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, apiRequest(http.MethodPost, "/v1/notifications", body))
	return rec.Code, rec.Body.String()
}

// apiRequest is a request as a script sends it: to 127.0.0.1, a POST's
// body declared JSON.
func apiRequest(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, "http://127.0.0.1:8480"+path, strings.NewReader(body))
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/json")
	}
	return r
}

// Bad input gets a 4xx naming the problem, and nothing is buffered for it.
func TestPostNotificationRejectsBadInput(t *testing.T) {
	t.Parallel()
	c := newTestClient(t)
	h := NewAPI(c, APIOptions{}, zaptest.NewLogger(t))
	cases := []struct {
		name, body string
		status     int
		mentions   string
	}{
		{"malformed JSON", `{"list": "ops",`, 400, "malformed JSON"},
		{"not an object", `["ops"]`, 400, "request body must be a JSON object, got array"},
		{"empty body", ``, 400, "empty request body"},
		{"trailing data", `{"list":"ops","subject":"s"} {}`, 400, "unexpected data after the object"},
		{"missing list", `{"subject":"Pump 3","body":"b"}`, 400, "list: required"},
		{"blank list", `{"list":"  ","subject":"Pump 3"}`, 400, "list: required"},
		{"missing subject", `{"list":"ops","body":"b"}`, 400, "subject: required"},
		{"two-line subject", `{"list":"ops","subject":"a\nb"}`, 400, "subject: must be one line"},
		{"body over limit", `{"list":"ops","subject":"s","body":"` + strings.Repeat("x", 1025) + `"}`, 400, "body: 1025 bytes is over the limit of 1024 bytes"},
		{"request far over limit", `{"list":"ops","subject":"s","body":"` + strings.Repeat("x", 20000) + `"}`, 413, "a notification body is limited to 1024 bytes by site.max_body_bytes"},
		{"unknown field", `{"list":"ops","subject":"s","priority":1}`, 400, `unknown field "priority"`},
		{"field name in the wrong case", `{"List":"ops","subject":"s"}`, 400, `unknown field "List" (known: list, subject, body, instance, script, idempotencyKey; names are case-sensitive)`},
		{"wrong type", `{"list":"ops","subject":42}`, 400, `field "subject" must be a string`},
		{"overlong instance", `{"list":"ops","subject":"s","instance":"` + strings.Repeat("i", 257) + `"}`, 400, "instance: longer than 256 characters"},
		{"overlong list", `{"list":"` + strings.Repeat("l", 201) + `","subject":"s"}`, 400, "list: longer than 200 characters"},
		{"overlong subject", `{"list":"ops","subject":"` + strings.Repeat("s", 901) + `"}`, 400, "subject: longer than 900 characters"},
	}
	for _, tc := range cases {
		code, body := post(t, h, tc.body)
		require.Equal(t, tc.status, code, tc.name)
		var e ErrorBody
		require.NoError(t, json.Unmarshal([]byte(body), &e), tc.name)
		require.Contains(t, e.Error, tc.mentions, tc.name)
	}
	depth, err := c.BufferDepth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth, "nothing is buffered for bad input")
}

// A body sent as JSON escapes is measured decoded: under the limit it is
// accepted, though the request is several times the limit.
func TestPostNotificationMeasuresEscapedBodyDecoded(t *testing.T) {
	t.Parallel()
	const limit = 16 << 10
	c, err := site.Open(context.Background(), filepath.Join(t.TempDir(), "site.db"),
		site.Options{SiteID: "plant-1", Node: "node-a", MaxBodyBytes: limit})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	h := NewAPI(c, APIOptions{}, zaptest.NewLogger(t))

	code, body := post(t, h, `{"list":"ops","subject":"s","body":"`+strings.Repeat(`\u0041`, limit)+`"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	code, body = post(t, h, `{"list":"ops","subject":"s","body":"`+strings.Repeat(`\u0041`, limit+1)+`"}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "body: 16385 bytes is over the limit of 16384 bytes")
}

// An accepted notification is on disk, with provenance, HLC and chain link,
// and its status is Forwarding until central has it.
func TestPostNotificationBuffersAndAnswersForwarding(t *testing.T) {
	t.Parallel()
	c, store := openClient(t, site.Options{SiteID: "plant-1", Node: "node-a", MaxBodyBytes: 1024})
	h := NewAPI(c, APIOptions{}, zaptest.NewLogger(t))
	code, body := post(t, h, `{"list":"ops","subject":"Pump 3 tripped","body":"Pressure low","instance":"pump-3","script":"trip.go"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	var acc Accepted
	require.NoError(t, json.Unmarshal([]byte(body), &acc))

	msg, err := store.Get(context.Background(), acc.ID)
	require.NoError(t, err)
	require.Equal(t, contract.KindNotification, msg.Category)
	require.Equal(t, sitestore.Provenance{SiteID: "plant-1", Node: "node-a", Instance: "pump-3", Script: "trip.go"}, msg.Provenance)
	var sub contract.NotificationSubmission
	require.NoError(t, json.Unmarshal(msg.Payload, &sub))
	require.Equal(t, acc.ID, sub.NotificationID)
	require.Equal(t, "pump-3", sub.SourceInstanceID)
	require.Len(t, msg.Link, 32)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, apiRequest(http.MethodGet, "/v1/notifications/"+acc.ID, ""))
	require.Equal(t, http.StatusOK, rec.Code)
	var st contract.NotificationState
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &st))
	require.Equal(t, contract.StatusForwarding, st.Status)

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, apiRequest(http.MethodGet, "/v1/notifications/not-a-uuid", ""))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	require.Contains(t, rec.Body.String(), "is not a notification id")
}

// Ids in any spelling but the canonical one are refused before a lookup.
func TestGetRefusesNonCanonicalIDs(t *testing.T) {
	t.Parallel()
	h := NewAPI(newTestClient(t), APIOptions{}, zaptest.NewLogger(t))
	for _, path := range []string{
		"/v1/notifications/%7B343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11%7D",
		"/v1/notifications/urn:uuid:343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11",
		"/v1/operations/343ebf6c0e5d4c4e9a4e2b0d7f1f2a11",
		"/v1/operations/343EBF6C-0E5D-4C4E-9A4E-2B0D7F1F2A11",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, apiRequest(http.MethodGet, path, ""))
		require.Equal(t, http.StatusBadRequest, rec.Code, path)
		require.Contains(t, rec.Body.String(), "lower-case UUID", path)
	}
}

// A script that retries with its Idempotency-Key gets the same id and
// buffers nothing more; the key reused for another notification is a 409.
func TestIdempotencyKeyMakesRetriesOneNotification(t *testing.T) {
	t.Parallel()
	c, store := openClient(t, site.Options{SiteID: "plant-1", Node: "node-a", MaxBodyBytes: 1024})
	h := NewAPI(c, APIOptions{}, zaptest.NewLogger(t))
	send := func(body, key string) (int, Accepted, string) {
		rec := httptest.NewRecorder()
		req := apiRequest(http.MethodPost, "/v1/notifications", body)
		req.Header.Set("Idempotency-Key", key)
		h.ServeHTTP(rec, req)
		var acc Accepted
		_ = json.Unmarshal(rec.Body.Bytes(), &acc)
		return rec.Code, acc, rec.Body.String()
	}
	code, first, _ := send(`{"list":"ops","subject":"Pump 3 tripped"}`, "trip-42")
	require.Equal(t, http.StatusAccepted, code)
	code, again, _ := send(`{"list":"ops","subject":"Pump 3 tripped"}`, "trip-42")
	require.Equal(t, http.StatusAccepted, code)
	require.Equal(t, first.ID, again.ID, "the same key and request: the same operation")
	require.Equal(t, contract.IdempotentOperationID("plant-1", contract.KindNotification, "trip-42"), first.ID)
	depth, err := store.Depth(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, depth)

	code, _, body := send(`{"list":"ops","subject":"Pump 4 tripped"}`, "trip-42")
	require.Equal(t, http.StatusConflict, code, body)
	require.Contains(t, body, `trip-42`)
	require.Contains(t, body, "already used for a different request")

	code, _, body = send(`{"list":"ops","subject":"s","idempotencyKey":"a"}`, "b")
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "differ")
	depth, err = store.Depth(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, depth, "refused requests buffer nothing")
}
