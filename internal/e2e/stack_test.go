package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/cluster"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/demosystem"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/logging"
	"github.com/outpost-dev/outpost/internal/pgserver"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/tracing"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/workers"
	"github.com/outpost-dev/outpost/workflows/operation"

	"github.com/outpost-dev/outpost/internal/testutil"
)

// stack is one whole Outpost: dev server, central worker, SMTP sink, one site.
type stack struct {
	t       *testing.T
	cfg     config.Config
	log     *zap.Logger
	dir     string
	server  *testsuite.DevServer
	client  client.Client
	siteURL string
	daemon  *sitedaemon.Daemon

	mu    sync.Mutex
	sinks []*smtpsink.Sink
	// metrics is central's registry, with the SDK metrics of client.
	metrics *workers.CentralMetrics
	// centralURL serves the outbox page, /metrics, /healthz and /readyz.
	centralURL string
	// demo is the external system "erp" of cached calls.
	demo *demosystem.System
	// uiPort serves the dev server's Web UI; 0 runs it headless.
	uiPort int
	// uiCodec is the codec endpoint the Web UI decodes with.
	uiCodec string
	// serverAddr is the dev server's frontend: temporal.address unless a
	// tweak put something (a proxy) in front of it.
	serverAddr string
	// noCentral leaves the central worker to the test (a child process).
	noCentral bool
	// noSite leaves the site daemon to the test (a child process).
	noSite bool
	// onCluster runs the stack on a self-hosted cluster instead of the
	// dev server (see onCluster).
	onCluster bool
	cluster   *cluster.Cluster

	// traces are the tracer providers of central and of each site, when
	// telemetry.otlp_endpoint is set.
	traces []*tracing.Provider
}

// stackOption changes how newStack starts the stack.
type stackOption func(*stack)

// withWebUI starts the dev server with its Web UI on a free port (see
// uiURL). Off by default: the UI costs memory and start-up time.
func withWebUI() stackOption {
	return func(s *stack) { s.uiPort = testutil.FreePort(s.t) }
}

// withWebUICodec starts the Web UI (withWebUI) with central's codec server
// as its codec endpoint, central listening on a port known in advance.
func withWebUICodec() stackOption {
	return func(s *stack) {
		withWebUI()(s)
		s.cfg.Central.Listen = freeAddr(s.t)
		s.cfg.Central.TemporalUIURL = s.uiURL()
		s.uiCodec = "http://" + s.cfg.Central.Listen + "/codec"
	}
}

// withoutCentral starts no central worker: the test runs its own.
func withoutCentral() stackOption {
	return func(s *stack) { s.noCentral = true }
}

// onMemoryDisk keeps the dev server's database and the files a test puts
// under s.dir on tmpfs, for a test that compares latencies measured in two
// windows of time: on this machine's virtual disk a single fsync can take
// 50-440 ms, and where one lands would decide the comparison, not the code
// under test. The stores are the real SQLite files all the same.
func onMemoryDisk() stackOption {
	return func(s *stack) {
		dir, err := os.MkdirTemp("/dev/shm", "outpost-e2e-")
		require.NoError(s.t, err, "onMemoryDisk needs a tmpfs at /dev/shm")
		s.t.Cleanup(func() { os.RemoveAll(dir) })
		s.dir = dir
	}
}

// withoutSite starts no site daemon: the test runs its own (siteProcess).
func withoutSite() stackOption {
	return func(s *stack) { s.noSite = true }
}

// onCluster runs the stack on a self-hosted Temporal cluster
// (internal/cluster): two server processes on PostgreSQL with production
// defaults, every client on node 0's frontend over mutual TLS.
func onCluster() stackOption {
	return func(s *stack) { s.onCluster = true }
}

// withPostgresCentral puts the central store on a throwaway PostgreSQL of
// its own, which shares nothing with Temporal's persistence, as two hosts'
// central workers would share one database server. Its password is in
// OUTPOST_DB_PASSWORD, as central.store.password_env's default expects (so
// tests using it cannot run in parallel).
func withPostgresCentral() stackOption {
	return func(s *stack) {
		pg := pgserver.StartForTest(s.t)
		require.NoError(s.t, pg.CreateDatabase(s.t.Context(), "outpost"))
		dsn, err := url.Parse(pg.DSN("outpost"))
		require.NoError(s.t, err)
		dsn.User = url.User(pg.User)
		s.t.Setenv("OUTPOST_DB_PASSWORD", pg.Password)
		s.cfg.Central.Store = config.CentralStore{Driver: config.DriverPostgres, DSN: dsn.String(), PasswordEnv: "OUTPOST_DB_PASSWORD"}
	}
}

// newStack starts everything with short intervals; tweak adjusts the config.
func newStack(t *testing.T, tweak func(*config.Config), opts ...stackOption) *stack {
	t.Helper()
	testutil.SkipIfShort(t)
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Temporal.Address = freeAddr(t)
	cfg.Site.ID = "plant-1"
	cfg.Site.Store = filepath.Join(dir, "site.db")
	cfg.Site.Listen = "127.0.0.1:0"
	cfg.Site.ForwardInterval = time.Second
	cfg.Site.PollInterval = 50 * time.Millisecond
	cfg.Central.Store.Path = filepath.Join(dir, "central.db")
	cfg.Central.Listen = "127.0.0.1:0"
	cfg.Central.SMTP.Port = testutil.FreePort(t)
	cfg.Central.SMTP.TLS = config.SMTPTLSNone
	cfg.Central.SMTP.Timeout = 5 * time.Second
	cfg.Central.SMTP.FinalReplyTimeout = 10 * time.Second
	cfg.Central.SMTP.RetryInterval = time.Second
	cfg.Central.SMTP.MaxRetries = 2
	cfg.Central.Lists = map[string][]string{"ops": {"ops@example.com", "oncall@example.com"}, "empty": {}}
	demo, err := demosystem.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { demo.Close() })
	cfg.Site.TelemetryDelay = 200 * time.Millisecond
	cfg.Site.ReconcileInterval = time.Hour // tests reconcile on demand
	cfg.Site.ExternalSystems = map[string]config.ExternalSystem{"erp": testSystem(demo.URL() + "/api")}
	cfg.Site.Databases = map[string]config.Database{
		"historian": testDatabase(filepath.Join(dir, "historian.db")),
		"archive":   testDatabase(filepath.Join(dir, "archive.db")),
	}
	serverAddr := cfg.Temporal.Address
	if tweak != nil {
		tweak(&cfg)
	}
	metrics := workers.NewCentralMetrics()
	t.Cleanup(func() { metrics.Close() })
	s := &stack{t: t, cfg: cfg, log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), dir: dir, demo: demo, metrics: metrics, serverAddr: serverAddr}
	for _, opt := range opts {
		opt(s)
	}
	s.startTemporal()
	s.startSMTP()
	c, err := fromconfig.DialTemporal(s.cfg.Temporal, s.log, s.metrics.SDK, s.startTracing(tracing.ServiceCentral))
	require.NoError(t, err)
	s.client = c
	t.Cleanup(c.Close)
	if !s.noCentral {
		s.startCentral()
	}
	if !s.noSite {
		s.startSite()
	}
	return s
}

func (s *stack) startTemporal() {
	s.t.Helper()
	if s.onCluster {
		s.cluster = cluster.StartForTest(s.t, s.cfg.Temporal.Namespace, s.log)
		s.cfg.Temporal = s.cluster.Temporal(0, s.cfg.Temporal)
		s.serverAddr = s.cfg.Temporal.Address
		return
	}
	// The first run on a fresh machine builds the pinned CLI (minutes).
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{
		Address: s.serverAddr, Namespace: s.cfg.Temporal.Namespace,
		DBFile: filepath.Join(s.dir, "temporal.db"), UIPort: s.uiPort, UICodecEndpoint: s.uiCodec, Logger: logging.NewTemporal(s.log),
		Output: s.serverLog(),
	})
	require.NoError(s.t, err)
	s.server = srv
	s.t.Cleanup(func() { s.stopTemporal() })
}

// uiURL is the dev server's Web UI (the stack must run withWebUI).
func (s *stack) uiURL() string {
	s.t.Helper()
	require.NotZero(s.t, s.uiPort, "the stack runs the dev server headless: start it withWebUI()")
	return fmt.Sprintf("http://127.0.0.1:%d", s.uiPort)
}

// serverLog collects the dev server's own log (errors only) and prints it
// if the test fails: a stalled workflow is often explained there.
func (s *stack) serverLog() io.Writer {
	var buf testutil.SyncBuffer
	s.t.Cleanup(func() {
		if s.t.Failed() && buf.String() != "" {
			s.t.Logf("temporal dev server log:\n%s", buf.String())
		}
	})
	return &buf
}

// stopTemporal stops the dev server; its state stays in the test's DB file.
func (s *stack) stopTemporal() {
	if s.server == nil {
		return
	}
	s.server.Client().Close()
	_ = s.server.Stop()
	s.server = nil
}

func (s *stack) startSMTP() {
	s.t.Helper()
	sink, err := smtpsink.Start(net.JoinHostPort(s.cfg.Central.SMTP.Host, strconv.Itoa(s.cfg.Central.SMTP.Port)))
	require.NoError(s.t, err)
	s.mu.Lock()
	s.sinks = append(s.sinks, sink)
	s.mu.Unlock()
	s.t.Cleanup(func() { sink.Close() })
}

// stopSMTP closes the SMTP server: connections are refused until startSMTP.
func (s *stack) stopSMTP() {
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NoError(s.t, s.sinks[len(s.sinks)-1].Close())
}

// received counts emails per notification id over every SMTP server run.
func (s *stack) received() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	counts := map[string]int{}
	for _, sink := range s.sinks {
		for id, n := range sink.CountByNotification() {
			counts[id] += n
		}
	}
	return counts
}

func (s *stack) startCentral() { s.startCentralWith(s.client) }

// startCentralWith runs the central worker in this process on tc.
func (s *stack) startCentralWith(tc client.Client) {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(s.t, workers.EnsureSearchAttributes(ctx, tc, s.cfg.Temporal.Namespace, s.log))
	opts, err := fromconfig.Central(s.cfg.Central, s.cfg.Temporal)
	require.NoError(s.t, err)
	central, err := workers.NewCentral(ctx, opts, tc, s.metrics.Registry, s.log)
	require.NoError(s.t, err)
	s.centralURL = "http://" + central.Addr()
	done := make(chan error, 1)
	go func() { done <- central.Run(ctx) }()
	s.t.Cleanup(func() { cancel(); require.NoError(s.t, <-done) })
	// As in production, sites see central's workers before they hand off.
	listed, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	require.NoError(s.t, workers.AwaitListed(listed, s.client, operation.WorkerBuildID))
}

// siteProc is one running site daemon.
type siteProc struct {
	t      *testing.T
	cfg    config.Site
	url    string
	daemon *sitedaemon.Daemon
}

func (s *stack) startSite() {
	s.t.Helper()
	p := s.runSite(s.cfg.Site)
	s.daemon, s.siteURL = p.daemon, p.url
}

// addSite runs another site daemon: site id, its own store and API port,
// the same external systems and databases as the first site.
func (s *stack) addSite(id string) *siteProc {
	s.t.Helper()
	cfg := s.cfg.Site
	cfg.ID = id
	cfg.Store = filepath.Join(s.dir, "site-"+id+".db")
	cfg.Listen = "127.0.0.1:0"
	return s.runSite(cfg)
}

// firstSite is the stack's own site daemon as a siteProc.
func (s *stack) firstSite() *siteProc {
	return &siteProc{t: s.t, cfg: s.cfg.Site, url: s.siteURL, daemon: s.daemon}
}

func (s *stack) runSite(cfg config.Site) *siteProc {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	traces := s.startTracing(tracing.ServiceSite)
	tc, err := fromconfig.LazyTemporal(s.cfg.Temporal, s.log, traces)
	require.NoError(s.t, err)
	d, err := sitedaemon.StartDaemon(ctx, fromconfig.SiteDaemon(cfg), tc, traces.TracerProvider(), s.log.With(zap.String("site", cfg.ID)))
	require.NoError(s.t, err)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	s.t.Cleanup(func() { cancel(); require.NoError(s.t, <-done); tc.Close() })
	return &siteProc{t: s.t, cfg: cfg, url: "http://" + d.Addr(), daemon: d}
}

// startTracing is a tracer provider of service exporting to
// telemetry.otlp_endpoint (nil when unset), flushed and stopped when the
// test ends, after what uses it (cleanups run last-registered first).
func (s *stack) startTracing(service string) *tracing.Provider {
	s.t.Helper()
	traces, err := tracing.Start(context.Background(), fromconfig.Tracing(s.cfg.Telemetry), service)
	require.NoError(s.t, err)
	s.mu.Lock()
	s.traces = append(s.traces, traces)
	s.mu.Unlock()
	s.t.Cleanup(func() { require.NoError(s.t, traces.Shutdown(context.Background())) })
	return traces
}

// flushTraces sends every span central and the sites have ended, and stops
// their tracing, as a process does when it stops.
func (s *stack) flushTraces() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, traces := range s.traces {
		require.NoError(s.t, traces.Shutdown(context.Background()))
	}
}

// call posts a cached call to this site's API.
func (p *siteProc) call(system, method string, params map[string]any) (site.CallResult, int) {
	p.t.Helper()
	var res site.CallResult
	code := p.post("/v1/calls", site.CallRequest{System: system, Method: method, Params: params, Script: "e2e"}, &res)
	return res, code
}

// notify posts a notification to this site's API and returns its id.
func (p *siteProc) notify(list, subject string) string {
	p.t.Helper()
	var acc sitedaemon.Accepted
	code := p.post("/v1/notifications", site.Notification{List: list, Subject: subject, Body: "body of " + subject, Script: "e2e"}, &acc)
	require.Equal(p.t, http.StatusAccepted, code)
	require.Equal(p.t, "Forwarding", acc.Status)
	return acc.ID
}

func (p *siteProc) post(path string, body, out any) int {
	p.t.Helper()
	data, err := json.Marshal(body)
	require.NoError(p.t, err)
	resp, err := http.Post(p.url+path, "application/json", bytes.NewReader(data))
	require.NoError(p.t, err)
	defer resp.Body.Close()
	require.NoError(p.t, json.NewDecoder(resp.Body).Decode(out))
	return resp.StatusCode
}

// operation reads a tracking row through this site's API (code 404: none).
func (p *siteProc) operation(id string) (contract.TrackedOperation, int) {
	p.t.Helper()
	var row contract.TrackedOperation
	code := p.get("/v1/operations/"+id, &row)
	return row, code
}

// notification reads a notification's status through this site's API.
func (p *siteProc) notification(id string) (contract.NotificationState, int) {
	p.t.Helper()
	var st contract.NotificationState
	code := p.get("/v1/notifications/"+id, &st)
	return st, code
}

func (p *siteProc) get(path string, out any) int {
	p.t.Helper()
	resp, err := http.Get(p.url + path)
	require.NoError(p.t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		require.NoError(p.t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// centralStore opens the central store the worker uses.
func (s *stack) centralStore() *centralstore.Store {
	s.t.Helper()
	opts, err := fromconfig.CentralStore(s.cfg.Central.Store)
	require.NoError(s.t, err)
	store, err := workers.OpenCentralStore(context.Background(), opts)
	require.NoError(s.t, err)
	s.t.Cleanup(func() { store.Close() })
	return store
}

// notify posts a notification to the stack's site API and returns its id.
func (s *stack) notify(list, subject string) string {
	s.t.Helper()
	return s.firstSite().notify(list, subject)
}

// status asks the stack's site API for a notification's status.
func (s *stack) status(id string) (contract.NotificationState, int) {
	s.t.Helper()
	return s.firstSite().notification(id)
}

// waitStatus waits until the site API reports want for every id.
func (s *stack) waitStatus(want contract.Status, timeout time.Duration, ids ...string) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		for _, id := range ids {
			if st, code := s.status(id); code != http.StatusOK || st.Status != want {
				return false
			}
		}
		return true
	}, timeout, 200*time.Millisecond, "waiting for %d notification(s) to be %s", len(ids), want)
}

// signal sends an operator signal to a notification's workflow.
func (s *stack) signal(id, name string, action contract.OperatorAction) {
	s.t.Helper()
	require.NoError(s.t, s.client.SignalWorkflow(context.Background(), contract.NotificationWorkflowID(id), "", name, action))
}

// testSystem is the external system "erp": short interval, three retries.
func testSystem(baseURL string) config.ExternalSystem {
	e := config.DefaultExternalSystem()
	e.BaseURL, e.Timeout, e.MaxRetries, e.RetryInterval = baseURL, 2*time.Second, 3, 2*time.Second
	e.Methods = map[string]config.Method{
		"createOrder": {Verb: "POST", Path: "/orders"},
		"getOrder":    {Verb: "GET", Path: "/orders/{id}"},
	}
	return e
}

// testDatabase is a SQLite target that gives up waiting for a lock quickly.
func testDatabase(path string) config.Database {
	d := config.DefaultDatabase()
	d.DSN, d.Timeout, d.MaxRetries, d.RetryInterval = path, 600*time.Millisecond, 3, 2*time.Second
	return d
}

func freeAddr(t *testing.T) string { return fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)) }

// history is every event of a workflow's history, in order.
func (s *stack) history(workflowID string) []*historypb.HistoryEvent {
	s.t.Helper()
	var events []*historypb.HistoryEvent
	iter := s.client.GetWorkflowHistory(context.Background(), workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(s.t, err)
		events = append(events, ev)
	}
	return events
}

// recordHistory writes a workflow's history to workflows/testdata when
// OUTPOST_RECORD_HISTORY=1, for the replay test. Rerun it after a deliberate,
// versioned change to NotificationWorkflow.
func (s *stack) recordHistory(workflowID, file string) {
	s.t.Helper()
	if os.Getenv("OUTPOST_RECORD_HISTORY") != "1" {
		return
	}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: s.history(workflowID)})
	require.NoError(s.t, err)
	require.NoError(s.t, os.WriteFile(filepath.Join("..", "..", "workflows", "testdata", file), data, 0o644))
}
