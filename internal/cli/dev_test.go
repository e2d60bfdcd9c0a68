package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// `outpost dev` brings the whole stack up, delivers a notification into its
// SMTP sink, a call to its demo system and a write to its demo database,
// and stops cleanly when cancelled.
func TestDevStackDeliversAndStops(t *testing.T) {
	testutil.SkipIfShort(t)
	dir := t.TempDir()
	dev := devTestConfig(t, dir)
	stdout := runDevDelivering(t, dev, func(stdout string) {
		require.Contains(t, stdout, "Temporal Web UI")
		// The banner names every port the dev server listens on.
		listening, err := devserver.ListeningPorts(dev.temporalPort)
		require.NoError(t, err)
		banner := regexp.MustCompile(`Temporal ports +(.*)`).FindStringSubmatch(stdout)
		require.NotNil(t, banner, stdout)
		for _, p := range listening {
			require.Contains(t, banner[1], strconv.Itoa(p))
		}
		require.Contains(t, banner[1], fmt.Sprintf("%d HTTP API, %d metrics", dev.temporalPort+1, dev.temporalPort+2))
		// The config the stack runs with, for the other commands beside it.
		written, err := config.Load(filepath.Join(dir, "data", "outpost.yaml"), config.Default())
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("127.0.0.1:%d", dev.temporalPort), written.Temporal.Address)
		require.Equal(t, filepath.Join(dir, "central", "central.db"), written.Central.Store.Path)
	})
	require.Contains(t, stdout, "Temporal Web UI")
	_, err := os.Stat(filepath.Join(dir, "data", "temporal.db"))
	require.NoError(t, err, "the dev server persists under dev.data_dir")
}

// `outpost dev --cluster` runs the same stack on a Temporal cluster of two
// server processes on PostgreSQL with mutual TLS, says how long it took and
// how to reach it, and removes the throwaway cluster when stopped.
func TestDevClusterDeliversAndStops(t *testing.T) {
	testutil.SkipIfShort(t)
	dir := t.TempDir()
	stdout := runDevDelivering(t, devTestConfig(t, dir), nil, "--cluster")
	require.Regexp(t, `Temporal cluster started in [0-9.]+m?s`, stdout)
	require.Regexp(t, `Temporal cluster  frontends 127\.0\.0\.1:\d+ and 127\.0\.0\.1:\d+`, stdout)
	require.Contains(t, stdout, "--tls-cert-path")
	require.NotContains(t, stdout, "Temporal Web UI", "the cluster has no Web UI")
	_, err := os.Stat(filepath.Join(dir, "data", "temporal.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "no dev server ran")
	folder := regexp.MustCompile(`on PostgreSQL in (\S+) `).FindStringSubmatch(stdout)
	require.NotNil(t, folder, "says where the cluster runs")
	_, err = os.Stat(folder[1])
	require.ErrorIs(t, err, os.ErrNotExist, "the throwaway cluster is removed on stop")
}

// runDevDelivering runs `outpost dev` on dev with extra flags, calls
// whileUp (when given) with the banner once it is up, checks that a
// notification, a call and a write are delivered, stops it with Ctrl-C and
// returns what it printed.
func runDevDelivering(t *testing.T, dev devConfig, whileUp func(stdout string), flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	args := append([]string{"dev", "--config", dev.file}, flags...)
	go func() { done <- Run(ctx, args, Env{Stdout: stdout, Stderr: stdout}) }()
	waitUp(t, stdout, done)
	if whileUp != nil {
		whileUp(stdout.String())
	}

	siteURL := fmt.Sprintf("http://127.0.0.1:%d/v1/notifications", dev.sitePort)
	var resp *http.Response
	whileRunning(t, done, 30*time.Second, "the site API never answered", func() bool {
		var err error
		resp, err = http.Post(siteURL, "application/json", strings.NewReader(`{"list":"ops","subject":"dev smoke","body":"hello"}`))
		return err == nil
	})
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	resp.Body.Close()

	whileRunning(t, done, time.Minute, "the sink never received the notification", func() bool {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", dev.sinkPort))
		if err != nil {
			return false
		}
		defer r.Body.Close()
		var page struct{ Count int }
		return json.NewDecoder(r.Body).Decode(&page) == nil && page.Count == 1
	})

	siteAPI := fmt.Sprintf("http://127.0.0.1:%d", dev.sitePort)
	for path, body := range map[string]string{
		"/v1/calls":  `{"system":"demo","method":"createOrder","params":{"sku":"P-100"}}`,
		"/v1/writes": `{"connection":"historian","sql":"INSERT INTO readings (tag, value) VALUES (?, ?)","args":["pump-3.pressure",4.2]}`,
	} {
		resp, err := http.Post(siteAPI+path, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		var res struct{ Status, Error string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&res))
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, res.Error)
		require.Equal(t, "Delivered", res.Status, path)
	}

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(45 * time.Second):
		t.Fatal("outpost dev did not stop within 45s of Ctrl-C")
	}
	return stdout.String()
}

// devConfig is a dev stack config on free ports in a test's folder.
type devConfig struct {
	file                             string
	sitePort, sinkPort, temporalPort int
}

// devTestConfig writes a dev stack config on free ports in dir.
func devTestConfig(t *testing.T, dir string) devConfig {
	t.Helper()
	sitePort, sinkPort, demoPort, temporalPort := testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)
	demoDB := filepath.Join(dir, "demo", "historian.db") // folders outpost dev must create
	cfgFile := filepath.Join(dir, "dev.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(fmt.Sprintf(`
temporal: {address: "127.0.0.1:%d"}
site:
  listen: "127.0.0.1:%d"
  store: %q
  external_systems:
    demo: {base_url: "http://127.0.0.1:%d/api", methods: {createOrder: {path: /orders}}}
  databases:
    historian: {dsn: %q}
central:
  listen: "127.0.0.1:%d"
  store: {path: %q}
  smtp: {port: %d}
dev: {data_dir: %q, temporal_ui_port: %d, sink_http: "127.0.0.1:%d", demo_system: "127.0.0.1:%d", demo_database: %q}
log: {level: warn}
`, temporalPort, sitePort, filepath.Join(dir, "site", "site.db"), demoPort, demoDB, testutil.FreePort(t), filepath.Join(dir, "central", "central.db"),
		testutil.FreePort(t), filepath.Join(dir, "data"), testutil.FreePort(t), sinkPort, demoPort, demoDB)), 0o644))
	return devConfig{file: cfgFile, sitePort: sitePort, sinkPort: sinkPort, temporalPort: temporalPort}
}

// whileRunning polls cond until it holds, failing with msg after timeout,
// or at once, with the reason, if `outpost dev` exits first: a stack that
// died must not be mistaken for a slow one.
func whileRunning(t *testing.T, done chan error, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("outpost dev exited while the test waited (%s): %v", msg, err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
	}
}

// waitUp waits until `outpost dev` prints that it is up; it fails at once,
// with the reason, if the command exits first (a port taken, a bad config).
// The first run on a fresh machine builds the pinned CLI: minutes.
func waitUp(t *testing.T, stdout *testutil.SyncBuffer, done chan error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Minute)
	for !strings.Contains(stdout.String(), "Ctrl-C stops everything") {
		select {
		case err := <-done:
			t.Fatalf("outpost dev exited before it came up: %v\n%s", err, stdout)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("dev stack never came up:\n%s", stdout)
		}
	}
}
