package e2e

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/outbox"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// Every secret Outpost handles is set to a marker: the site API token, the
// SMTP password, the Temporal API key, an external system's token, the
// session key and the payload key. The site and central run as processes
// at log level debug, through mutual TLS, with a failed SMTP login, a
// refused API token, a call retried through Temporal and a page sign-in on
// the way. None of the markers appears in anything the stack wrote: the
// processes' logs, the refused requests' answers, both /metrics, config
// check and outpost status output, the Temporal histories (decoded), and
// the site, central and Temporal database files.
func TestSecretsNeverLeak(t *testing.T) {
	const marker = "SECRET-MARKER-"
	for env, v := range map[string]string{
		"OUTPOST_SITE_TOKEN": marker + "site-token", "OUTPOST_SMTP_PASSWORD": marker + "smtp",
		"OUTPOST_TEMPORAL_API_KEY": marker + "api-key", "OUTPOST_ERP_TOKEN": marker + "erp",
		"OUTPOST_SESSION_KEY": marker + "session-key-0123456789abcdef",
	} {
		t.Setenv(env, v)
	}
	key := writeKey(t, "k1")
	keyText, err := os.ReadFile(key.File)
	require.NoError(t, err)
	dir := t.TempDir()
	ca := newCA(t, "outpost test CA")
	clientCert, clientKey := ca.writePair(t, dir, "client", ca.issue(t, "outpost", nil, x509.ExtKeyUsageClientAuth))
	caFile := filepath.Join(dir, "ca.pem")
	require.NoError(t, os.WriteFile(caFile, ca.certPEM, 0o600))
	s := newStack(t, func(c *config.Config) {
		proxy := startTLSProxy(t, c.Temporal.Address, ca.issue(t, "temporal.test", []string{"temporal.test"}, x509.ExtKeyUsageServerAuth), ca.pool())
		c.Temporal.Address = proxy.addr
		c.Temporal.TLSCertFile, c.Temporal.TLSKeyFile, c.Temporal.TLSCAFile, c.Temporal.TLSServerName = clientCert, clientKey, caFile, "temporal.test"
		c.Temporal.EncryptionKeys = []config.EncryptionKey{key}
	}, withoutCentral(), withoutSite())
	s.mu.Lock()
	sink := s.sinks[len(s.sinks)-1]
	s.mu.Unlock()
	sink.RequireAuth("outpost", "a different password") // the first attempt's login fails

	siteAddr, centralAddr := freeAddr(t), freeAddr(t)
	cfgFile := filepath.Join(dir, "outpost.yaml")
	require.NoError(t, os.WriteFile(cfgFile, fmt.Appendf(nil, `temporal:
  address: %s
  tls_cert_file: %s
  tls_key_file: %s
  tls_ca_file: %s
  tls_server_name: temporal.test
  encryption_keys: [{id: k1, file: %s}]
site:
  id: plant-1
  store: %s
  listen: %s
  api_tokens: {scripts: OUTPOST_SITE_TOKEN}
  metrics_need_token: true
  forward_interval: 1s
  external_systems:
    erp:
      base_url: %s
      auth_env: OUTPOST_ERP_TOKEN
      timeout: 2s
      max_retries: 3
      retry_interval: 1s
      methods: {createOrder: {verb: POST, path: /orders}}
central:
  listen: %s
  store: {path: %s}
  smtp: {host: 127.0.0.1, port: %d, username: outpost, tls: none, retry_interval: 1s, max_retries: 5}
  lists: {ops: [ops@example.com]}
  page_auth:
    users: {ana: {password_hash: %q, role: operator}}
    session_key_env: OUTPOST_SESSION_KEY
log: {level: debug}
`, s.cfg.Temporal.Address, clientCert, clientKey, caFile, key.File, filepath.Join(dir, "site.db"), siteAddr,
		s.demo.URL()+"/api", centralAddr, filepath.Join(dir, "central.db"), s.cfg.Central.SMTP.Port, bcryptHash(t, "ana-pass")), 0o600))
	bin := testutil.BuildOutpost(t)
	httpc := &http.Client{Timeout: 5 * time.Second}
	central := startProcess(t, bin, "central", cfgFile, "http://"+centralAddr, httpc)
	siteProc := startProcess(t, bin, "site", cfgFile, "http://"+siteAddr, httpc)
	siteAPI := func(method, path, token string, body any) (int, string) {
		var r io.Reader
		if body != nil {
			data, err := json.Marshal(body)
			require.NoError(t, err)
			r = bytes.NewReader(data)
		}
		req, err := http.NewRequest(method, "http://"+siteAddr+path, r)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := httpc.Do(req)
		require.NoError(t, err)
		return resp.StatusCode, readAll(t, resp)
	}
	var written strings.Builder // everything the stack wrote or answered
	record := func(what string, text string) { fmt.Fprintf(&written, "\n--- %s\n%s", what, text) }

	code, refused := siteAPI(http.MethodPost, "/v1/notifications", marker+"wrong-token", map[string]string{"list": "ops", "subject": "s", "body": "b"})
	require.Equal(t, http.StatusUnauthorized, code)
	record("401 answer", refused)

	token := os.Getenv("OUTPOST_SITE_TOKEN")
	code, body := siteAPI(http.MethodPost, "/v1/notifications", token, map[string]string{"list": "ops", "subject": "Pump 3 tripped", "body": "low pressure"})
	require.Equal(t, http.StatusAccepted, code, body)
	var note struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &note))
	statusOf := func(path string) string {
		code, body := siteAPI(http.MethodGet, path, token, nil)
		var st struct{ Status string }
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			return ""
		}
		return st.Status
	}
	// A refused login (535) is permanent: the notification parks.
	testutil.WaitFor(t, time.Minute, func() bool { return statusOf("/v1/notifications/"+note.ID) == string(contract.StatusParked) },
		func() string { return "the notification parked after a refused SMTP login" })
	sink.RequireAuth("outpost", os.Getenv("OUTPOST_SMTP_PASSWORD"))
	out, err := exec.Command(bin, "parked", "retry", note.ID, "--operator", "ana", "--config", cfgFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	record("outpost parked retry", string(out))
	testutil.WaitFor(t, time.Minute, func() bool { return statusOf("/v1/notifications/"+note.ID) == string(contract.StatusDelivered) },
		func() string { return "the notification delivered once the SMTP login works" })

	s.demo.FailNext(1, http.StatusServiceUnavailable)
	code, body = siteAPI(http.MethodPost, "/v1/calls", token, map[string]any{"system": "erp", "method": "createOrder", "params": map[string]string{"sku": "P-1"}})
	require.Equal(t, http.StatusAccepted, code, body)
	var call struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &call))
	testutil.WaitFor(t, time.Minute, func() bool { return statusOf("/v1/operations/"+call.ID) == string(contract.StatusDelivered) },
		func() string { return "the call delivered on its retry" })

	jar := newBrowserJar(t)
	resp, err := jar.PostForm("http://"+centralAddr+"/login", url.Values{"user": {"ana"}, "password": {"ana-pass"}})
	require.NoError(t, err)
	record("outbox page", readAll(t, resp))
	require.Equal(t, http.StatusOK, resp.StatusCode)

	_, metrics := siteAPI(http.MethodGet, "/metrics", token, nil)
	require.Contains(t, metrics, "outpost_site_")
	record("site /metrics", metrics)
	resp, err = httpc.Get("http://" + centralAddr + "/metrics")
	require.NoError(t, err)
	record("central /metrics", readAll(t, resp))

	out, err = exec.Command(bin, "config", "check", cfgFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	record("config check", string(out))
	out, err = exec.Command(bin, "status", note.ID, "--config", cfgFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "Delivered")
	record("outpost status", string(out))

	record("temporal histories, decoded", decodedHistories(t, s, map[string]string{
		contract.NotificationWorkflowID(note.ID): `"listName":"ops"`, contract.CachedCallWorkflowID(call.ID): `"sku":"P-1"`,
	}))
	central.kill()
	siteProc.kill()
	record("outpost central log", central.out.String())
	record("outpost site log", siteProc.out.String())
	require.Contains(t, siteProc.out.String(), "DEBUG", "the site logged at debug level: the grep below reads something")
	for _, f := range []string{filepath.Join(dir, "site.db"), filepath.Join(dir, "central.db"), filepath.Join(s.dir, "temporal.db")} {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		record(f, string(data))
	}

	for _, secret := range []string{marker, strings.TrimSpace(string(keyText))} {
		i := strings.Index(written.String(), secret)
		if i >= 0 {
			all := written.String()
			t.Fatalf("a secret leaked: %q at %d, in:\n%s", secret, i, all[max(0, i-400):min(len(all), i+200)])
		}
	}
}

// decodedHistories is `temporal workflow show -o json` of each workflow,
// decoded through a codec server that needs no sign-in, with every payload's
// bytes appended; each must show its plain text (workflow id → text).
func decodedHistories(t *testing.T, s *stack, plain map[string]string) string {
	t.Helper()
	c, err := fromconfig.PayloadCodec(s.cfg.Temporal.EncryptionKeys)
	require.NoError(t, err)
	page, err := outbox.New(nil, nil, outbox.Options{Codec: c}) // the codec server alone
	require.NoError(t, err)
	codecSrv := httptest.NewServer(page)
	t.Cleanup(codecSrv.Close)
	bin, err := devserver.TemporalBinary(t.Context())
	require.NoError(t, err)
	var b strings.Builder
	for id, want := range plain {
		out, err := exec.Command(bin, "workflow", "show", "-o", "json", "--address", s.serverAddr, "--namespace", s.cfg.Temporal.Namespace,
			"--workflow-id", id, "--codec-endpoint", codecSrv.URL+"/codec").CombinedOutput()
		require.NoError(t, err, "temporal workflow show %s:\n%s", id, out)
		decoded := withPayloadsDecoded(t, out)
		require.Contains(t, decoded, want, "%s decoded", id)
		b.WriteString(decoded)
	}
	return b.String()
}

func newBrowserJar(t *testing.T) *http.Client {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c.Jar = jar
	return c
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(data)
}
