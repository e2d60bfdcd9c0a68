package e2e

import (
	"database/sql"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/site/targetcalls"
)

// A web page open in a real browser on the site host tries to use the site
// API: an HTML form posting text/plain crafted to be valid JSON (the
// classic cross-site request) and a no-cors fetch. The browser sends both;
// the API refuses both, and the database the page aimed at is untouched.
// A script's request, for contrast, runs.
func TestBrowserCannotUseSiteAPI(t *testing.T) {
	chromium := chromiumOrSkip(t)
	dir := t.TempDir()
	historian := filepath.Join(dir, "historian.db")
	db, err := sql.Open("sqlite", historian)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(`CREATE TABLE readings (tag TEXT)`)
	require.NoError(t, err)

	cfgPath := filepath.Join(dir, "outpost.yaml")
	require.NoError(t, os.WriteFile(cfgPath, fmt.Appendf(nil,
		"site:\n  id: plant-1\n  store: %s\n  databases:\n    historian: {dsn: %s}\n",
		filepath.Join(dir, "site.db"), historian), 0o644))
	c, err := targetcalls.OpenConfig(t.Context(), cfgPath, site.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	var posts atomic.Int32
	api := sitedaemon.NewAPI(c, sitedaemon.APIOptions{}, zaptest.NewLogger(t))
	apiSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(apiSrv.Close)

	// The form's one field name carries the JSON up to a string the '='
	// and the value close: {"connection":…,"script":"="}.
	const write = `{"connection":"historian","sql":"INSERT INTO readings (tag) VALUES ('%s')","script":"`
	page := fmt.Sprintf(`<!doctype html><html><body>
<form method="POST" enctype="text/plain" action="%[1]s/v1/writes"><input name="%[2]s" value='"}'></form>
<script>
fetch(%[1]q + "/v1/writes", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
  body: '{"connection":"historian","sql":"INSERT INTO readings (tag) VALUES (\'fetch\')"}'})
  .finally(() => document.forms[0].submit());
</script></body></html>`, apiSrv.URL, html.EscapeString(fmt.Sprintf(write, "form")))
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	}))
	t.Cleanup(evil.Close)
	// Another origin: "localhost" is not the API's 127.0.0.1.
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	ctx := newBrowser(t, chromium)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(evilURL)))
	body := waitPageText(t, ctx, time.Minute, "refused")
	require.Contains(t, body, "cross-site request refused", "the form's answer, shown after it navigated")
	require.Equal(t, int32(2), posts.Load(), "the browser sent the fetch and the form")

	var rows int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM readings`).Scan(&rows))
	require.Zero(t, rows, "no statement from the page ran")

	resp, err := http.Post(apiSrv.URL+"/v1/writes", "application/json",
		strings.NewReader(`{"connection":"historian","sql":"INSERT INTO readings (tag) VALUES ('script')"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM readings`).Scan(&rows))
	require.Equal(t, 1, rows, "a script's write runs")
}
