package sitedaemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/logging"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
)

// erpServer answers 200, or the status in failWith when it is set.
func erpServer(t *testing.T, failWith *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := failWith.Load(); code != 0 {
			http.Error(w, `{"error":"refused"}`, int(code))
			return
		}
		fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// defaultOptions are the daemon's options from the config file's defaults
// (config.Default().Site).
func defaultOptions() Options {
	return Options{
		ID: "site-1", Node: "node-a", Store: "outpost-site.db", Listen: "127.0.0.1:8480",
		ForwardInterval: 10 * time.Second, ForwardBatch: 100, ForwardParallelism: 8,
		PollInterval: 250 * time.Millisecond, MaxBodyBytes: 64 << 10,
		CommitBatch: 256, CommitDelay: 2 * time.Millisecond,
		TrackingRetention: 7 * 24 * time.Hour, PurgeInterval: time.Hour,
		TelemetryBatch: 200, TelemetryDelay: 2 * time.Second, ReconcileInterval: 5 * time.Minute,
		PollerCheckInterval: 30 * time.Second, HolderGrace: 2 * time.Minute,
	}
}

func siteDefinitions(erpURL, dbPath string) Options {
	cfg := defaultOptions()
	erp := targets.DefaultExternalSystem()
	erp.BaseURL, erp.Timeout = erpURL, time.Second
	erp.Methods = map[string]targets.Method{"getOrder": {Verb: "GET", Path: "/orders/{id}"}}
	db := targets.DefaultDatabase()
	db.DSN = dbPath
	cfg.ExternalSystems = map[string]targets.ExternalSystem{"erp": erp}
	cfg.Databases = map[string]targets.Database{"historian": db}
	return cfg
}

// openSite is a client of cfg's store and targets, the way the daemon
// makes its own.
func openSite(t *testing.T, cfg Options) *site.Client {
	t.Helper()
	store, err := sitestore.Open(context.Background(), cfg.Store, sitestore.Options{CommitBatch: cfg.CommitBatch, CommitDelay: cfg.CommitDelay})
	require.NoError(t, err)
	reg := targets.New(cfg.ExternalSystems, cfg.Databases)
	c := site.New(store, reg, targetexec.New(reg), site.Options{SiteID: cfg.ID, Node: cfg.Node})
	t.Cleanup(func() { c.Close() })
	return c
}

func postJSON(t *testing.T, h http.Handler, path, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, apiRequest(http.MethodPost, path, body))
	return rec.Code, rec.Body.String()
}

// Bad calls and writes get a 400 naming the problem; nothing is tracked or
// buffered for them.
func TestPostCallsAndWritesRejectBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := siteDefinitions("http://127.0.0.1:1", filepath.Join(dir, "historian.db"))
	cfg.Store = filepath.Join(dir, "site.db")
	c := openSite(t, cfg)
	h := NewAPI(c, APIOptions{}, zaptest.NewLogger(t))
	cases := []struct {
		name, path, body, mentions string
	}{
		{"missing system", "/v1/calls", `{"method":"getOrder"}`, "system: is required"},
		{"missing method", "/v1/calls", `{"system":"erp"}`, "method: is required"},
		{"not an object", "/v1/calls", `"erp"`, "request body must be a JSON object, got string"},
		{"unknown system", "/v1/calls", `{"system":"mes","method":"getOrder"}`, `system: unknown external system "mes"`},
		{"unknown method", "/v1/calls", `{"system":"erp","method":"cancel"}`, `method: system "erp" has no method "cancel"`},
		{"missing path param", "/v1/calls", `{"system":"erp","method":"getOrder","params":{}}`, "params.id"},
		{"unknown field", "/v1/calls", `{"system":"erp","method":"getOrder","retries":3}`, `unknown field "retries" (known: system, method, params, instance, script, idempotencyKey)`},
		{"malformed", "/v1/calls", `{"system":`, "malformed JSON"},
		{"field name in the wrong case", "/v1/calls", `{"System":"erp","method":"getOrder","params":{"id":"1"}}`, `unknown field "System"`},
		{"missing connection", "/v1/writes", `{"sql":"DELETE FROM t"}`, "connection: is required"},
		{"unknown connection", "/v1/writes", `{"connection":"mes","sql":"DELETE FROM t"}`, `connection: unknown database "mes"`},
		{"empty sql", "/v1/writes", `{"connection":"historian","sql":" "}`, "sql"},
		{"args not a list", "/v1/writes", `{"connection":"historian","sql":"DELETE FROM t","args":{"a":1}}`, `field "args" must be an array, got object`},
		{"params not an object", "/v1/calls", `{"system":"erp","method":"getOrder","params":[1]}`, `field "params" must be an object, got array`},
	}
	for _, tc := range cases {
		code, body := postJSON(t, h, tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", tc.name, body)
		var e ErrorBody
		require.NoError(t, json.Unmarshal([]byte(body), &e), tc.name)
		require.Contains(t, e.Error, tc.mentions, tc.name)
	}
	code, body := postJSON(t, h, "/v1/writes", `{"connection":"historian","sql":"`+strings.Repeat("x", 1<<20)+`"}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, code, body)
	require.Contains(t, body, "a write request is limited to 1 MiB")
	rows, err := c.Tracking().List(context.Background())
	require.NoError(t, err)
	require.Empty(t, rows, "nothing is tracked for bad input")
	depth, err := c.BufferDepth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth)
}

// The daemon purges terminal tracking rows past the retention window on its
// own, with central unreachable; it keeps every row still in flight and
// every row central has not received yet.
func TestDaemonPurgesTerminalRowsWithCentralUnreachable(t *testing.T) {
	t.Parallel()
	var failWith atomic.Int32
	cfg := daemonSiteConfig(t, &failWith)
	cfg.TrackingRetention, cfg.PurgeInterval = 500*time.Millisecond, 100*time.Millisecond
	d, ctx := startDaemonCentralDown(t, cfg)

	delivered, err := d.Client.Call(ctx, "erp", "getOrder", map[string]any{"id": 7})
	require.NoError(t, err)
	require.Equal(t, contract.StatusDelivered, delivered.Status)
	require.JSONEq(t, `{"path":"/orders/7"}`, string(delivered.Body))
	// Central received this row before it went away.
	row, err := d.Client.Tracking().Status(ctx, delivered.ID)
	require.NoError(t, err)
	require.NoError(t, d.store.AdvanceTelemetryCursor(ctx, row.Seq))
	failWith.Store(http.StatusBadRequest)
	unsent, err := d.Client.Call(ctx, "erp", "getOrder", map[string]any{"id": 9})
	var refused *site.TargetError
	require.ErrorAs(t, err, &refused)
	failWith.Store(http.StatusServiceUnavailable)
	queued, err := d.Client.Call(ctx, "erp", "getOrder", map[string]any{"id": 8})
	require.NoError(t, err)
	require.True(t, queued.Queued())

	require.Eventually(t, func() bool {
		_, err := d.Client.Tracking().Status(ctx, delivered.ID)
		return err != nil && strings.Contains(err.Error(), site.ErrNotFound.Error())
	}, 10*time.Second, 50*time.Millisecond, "the delivered row is purged after the retention window")
	row, err = d.Client.Tracking().Status(ctx, queued.ID)
	require.NoError(t, err, "a Pending row is never purged")
	require.Equal(t, contract.StatusPending, row.Status)
	row, err = d.Client.Tracking().Status(ctx, unsent.ID)
	require.NoError(t, err, "a terminal row central has not received is kept")
	require.Equal(t, contract.StatusFailed, row.Status)
}

// daemonSiteConfig is a site in a temporary folder whose external system
// "erp" answers 200, or the status in failWith when it is set.
func daemonSiteConfig(t *testing.T, failWith *atomic.Int32) Options {
	t.Helper()
	erp := erpServer(t, failWith)
	dir := t.TempDir()
	cfg := siteDefinitions(erp.URL, filepath.Join(dir, "historian.db"))
	cfg.Store, cfg.Listen = filepath.Join(dir, "site.db"), "127.0.0.1:0"
	return cfg
}

// startDaemonCentralDown runs a site daemon whose Temporal address has
// nothing listening: central is down for the whole test.
func startDaemonCentralDown(t *testing.T, cfg Options) (*Daemon, context.Context) {
	t.Helper()
	log := zaptest.NewLogger(t)
	tc, err := client.NewLazyClient(client.Options{
		HostPort: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), Logger: logging.NewTemporal(log),
	})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	d, err := StartDaemon(context.Background(), cfg, tc, nil, log)
	require.NoError(t, err)
	ctx, _ := runDaemon(t, d)
	return d, ctx
}

// runDaemon runs a started daemon until the returned stop, or the test's
// end; ctx ends when it stops.
func runDaemon(t *testing.T, d *Daemon) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); require.NoError(t, <-done) }) }
	t.Cleanup(stop)
	return ctx, stop
}

// A write that changed nothing answers rowsAffected 0, not no answer; an
// integer past int64 is refused, not rounded into another number.
func TestPostWriteAnswersZeroRowsAndRefusesHugeIntegers(t *testing.T) {
	t.Parallel()
	h, _, db := inputSite(t)

	code, body := postJSON(t, h, "/v1/writes", `{"connection":"historian","sql":"UPDATE readings SET value = 1 WHERE tag = ?","args":["none"]}`)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"rowsAffected":0`)

	code, body = postJSON(t, h, "/v1/writes", `{"connection":"historian","sql":"INSERT INTO readings (tag, value) VALUES (?, ?)","args":["big",99999999999999999999]}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "args[1]: 99999999999999999999 does not fit in an int64")
	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM readings`).Scan(&n))
	require.Zero(t, n)
}

// The immediate attempt carries the operation's id as Idempotency-Key (the
// header a definition names); with "Prefer: respond-async" the caller gets
// the id at once, before the attempt ends, and follows it by id.
func TestRespondAsyncAnswersTheIDBeforeTheAttempt(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	keys := make(chan string, 2)
	erp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("X-Request-Key")
		<-release
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(erp.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	dir := t.TempDir()
	cfg := siteDefinitions(erp.URL, filepath.Join(dir, "historian.db"))
	sys := cfg.ExternalSystems["erp"]
	sys.IdempotencyHeader, sys.Timeout = "X-Request-Key", 10*time.Second
	cfg.ExternalSystems["erp"] = sys
	cfg.Store = filepath.Join(dir, "site.db")
	c := openSite(t, cfg)
	h := NewAPI(c, APIOptions{}, zaptest.NewLogger(t))

	req := apiRequest(http.MethodPost, "/v1/calls", `{"system":"erp","method":"getOrder","params":{"id":"1"}}`)
	req.Header.Set("Prefer", "respond-async")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req) // returns while the target still holds the attempt
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	require.Equal(t, "respond-async", rec.Header().Get("Preference-Applied"))
	var res site.CallResult
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
	require.Equal(t, contract.StatusPending, res.Status)
	require.Equal(t, "/v1/operations/"+res.ID, rec.Header().Get("Location"))
	require.Equal(t, res.ID, <-keys, "the attempt carries the id as its idempotency key")

	row, err := c.Tracking().Status(context.Background(), res.ID)
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, row.Status, "the attempt is still running")
	close(release)
	require.Eventually(t, func() bool {
		row, err := c.Tracking().Status(context.Background(), res.ID)
		return err == nil && row.Status == contract.StatusDelivered
	}, 10*time.Second, 20*time.Millisecond)
}

// A queued call's status shows what it will send (so an operator can judge
// a parked one), with secret params hidden at any depth; once delivered
// the request is gone from the site and from the answer.
func TestOperationStatusShowsTheRequestRedacted(t *testing.T) {
	t.Parallel()
	var failWith atomic.Int32
	failWith.Store(http.StatusServiceUnavailable)
	dir := t.TempDir()
	cfg := siteDefinitions(erpServer(t, &failWith).URL, filepath.Join(dir, "historian.db"))
	cfg.Store = filepath.Join(dir, "site.db")
	c := openSite(t, cfg)
	h := NewAPI(c, APIOptions{RedactFields: []string{"pin"}}, zaptest.NewLogger(t))

	code, body := postJSON(t, h, "/v1/calls", `{"system":"erp","method":"getOrder","params":{"id":"42","Password":"hunter2","auth":{"token":"t0k3n","pin":"1234","user":"ana"}}}`)
	require.Equal(t, http.StatusAccepted, code, body)
	var res site.CallResult
	require.NoError(t, json.Unmarshal([]byte(body), &res))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, apiRequest(http.MethodGet, "/v1/operations/"+res.ID, ""))
	require.Equal(t, http.StatusOK, rec.Code)
	got := rec.Body.String()
	require.Contains(t, got, `"status":"Pending"`)
	require.Contains(t, got, `"request":{"kind":"ExternalCall","system":"erp","method":"getOrder"`)
	require.Contains(t, got, `"user":"ana"`)
	require.Contains(t, got, `"id":"42"`)
	for _, secret := range []string{"hunter2", "t0k3n", "1234"} {
		require.NotContains(t, got, secret)
	}
	require.Equal(t, 3, strings.Count(got, `"[redacted]"`))
}
