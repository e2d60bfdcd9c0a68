package e2e

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/outbox"
	"github.com/outpost-dev/outpost/site"
)

// The outbox page in a real headless Chromium, on a real stack, with
// sign-in: the page asks for login; a viewer sees a notification parked
// while SMTP is down and a call parked while its target fails, in the tiles
// and the list, but no Retry button; an operator's Retry on the notification
// (SMTP back) delivers it and the audit row names that operator, whatever
// the request says; Discard on the call ends it Discarded, through the same
// signals an operator sends. OUTPOST_SCREENSHOTS=1 writes the page to
// docs/outbox.png, the delivered notification's page to
// docs/outbox-notification.png and the list of delivered notifications to
// docs/outbox-notifications.png.
func TestOutboxPageInChromium(t *testing.T) {
	chromium := chromiumOrSkip(t)
	s := newStack(t, nil)
	const subject = "Pump 3 tripped <b>now</b>"
	note, call := s.parkOneOfEach(subject, "outbox-page")
	s.waitMirror(call.ID, contract.StatusParked)

	pageHandler, err := outbox.New(s.centralStore(), s.client, outbox.Options{
		TemporalUIURL: s.cfg.Central.TemporalUIURL, Namespace: s.cfg.Temporal.Namespace,
		StuckAge: s.cfg.Central.StuckAge, Window: time.Hour,
		Auth: outbox.Auth{Users: map[string]outbox.User{
			"ana": {PasswordHash: bcryptHash(t, "ana-pass"), Role: outbox.RoleOperator},
			"vic": {PasswordHash: bcryptHash(t, "vic-pass"), Role: outbox.RoleViewer},
		}},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(pageHandler)
	t.Cleanup(srv.Close)
	ctx := newBrowser(t, chromium)

	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1400, 900), chromedp.Navigate(srv.URL+"/")))
	signInAs(t, ctx, "vic", "vic-pass")
	tiles := map[string]string{}
	for _, name := range []string{"queue", "stuck", "parked", "delivered", "oldest"} {
		tiles[name] = text(t, ctx, "#tile-"+name+" .value")
	}
	require.Equal(t, map[string]string{"queue": "0", "stuck": "0", "parked": "2", "delivered": "0", "oldest": "-"}, tiles)
	body := text(t, ctx, "body")
	require.Contains(t, body, "Signed in as vic (viewer)")
	require.Contains(t, body, subject, "the subject shows as text, not markup")
	require.Contains(t, body, "erp.createOrder")
	require.Contains(t, body, contract.NotificationWorkflowID(note))
	buttons, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('button.retry, button.discard').length"))
	require.NoError(t, err)
	require.Zero(t, buttons, "a viewer gets no Retry or Discard button")
	href, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#item-"+note+" a.workflow"), "href"))
	require.NoError(t, err)
	require.Equal(t, s.cfg.Central.TemporalUIURL+"/namespaces/default/workflows/notification%2F"+note, href.Value)

	// The parked call's page shows what it sends, its secret redacted, and
	// its audit trail.
	_, err = chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("#item-"+call.ID+" a.details"))))
	require.NoError(t, err)
	request := text(t, ctx, "#request")
	require.Contains(t, request, `"sku": "outbox-page"`)
	require.Contains(t, request, `"password": "[redacted]"`)
	require.NotContains(t, text(t, ctx, "body"), "hunter2")
	require.Equal(t, "Parked", text(t, ctx, "#status"))
	require.Contains(t, text(t, ctx, "#audit"), "Enqueued")
	require.Contains(t, text(t, ctx, "#audit"), "Parked")
	_, err = chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("#back"))))
	require.NoError(t, err)

	_, err = chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("#sign-out"))))
	require.NoError(t, err)
	signInAs(t, ctx, "ana", "ana-pass")
	screenshot(t, ctx, chromedp.FullScreenshot(100), "outbox.png")

	// Retry the notification from the page once SMTP is back.
	s.startSMTP()
	require.NoError(t, chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS("#item-"+note+" input[name=reason]"), "relay fixed")))
	submit(t, ctx, "#item-"+note+" button.retry")
	require.Contains(t, text(t, ctx, ".flash"), "Sent retry to "+contract.NotificationWorkflowID(note)+" as ana.")
	s.waitStatus(contract.StatusDelivered, 30*time.Second, note)
	require.Equal(t, 1, s.received()[note], "delivered once")
	require.Contains(t, s.auditLines(note), "operator/1 OperatorRetry Pending ana relay fixed", "the audit log names the signed-in operator")

	// Discard the call from its own page, which it comes back to.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/items/"+contract.KindExternalCall+"/"+call.ID), chromedp.WaitVisible(chromedp.CSS("#request"))))
	submit(t, ctx, "button.discard")
	require.Contains(t, text(t, ctx, ".flash"), "Sent discard to "+contract.CachedCallWorkflowID(call.ID)+" as ana.")
	require.NotEmpty(t, text(t, ctx, "#request"), "back on the call's page")
	s.waitOperation(call.ID, contract.StatusDiscarded, 30*time.Second)
	s.waitMirror(call.ID, contract.StatusDiscarded)

	// Reloaded, the page has nothing parked and one delivery in the window.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#items"))))
	require.Equal(t, "0", text(t, ctx, "#tile-parked .value"))
	require.Equal(t, "1", text(t, ctx, "#tile-delivered .value"))
	require.Contains(t, text(t, ctx, "#items"), "Nothing stuck or parked matches.")

	// The delivered notification's page shows its body, where it went and
	// who retried it.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/items/"+contract.KindNotification+"/"+note), chromedp.WaitVisible(chromedp.CSS("#audit"))))
	require.Equal(t, "Delivered", text(t, ctx, "#status"))
	require.Equal(t, subject, text(t, ctx, "#subject"))
	require.Contains(t, text(t, ctx, "#payload"), "ops@example.com")
	require.Contains(t, text(t, ctx, "#audit"), "relay fixed")
	screenshot(t, ctx, chromedp.FullScreenshot(100), "outbox-notification.png")

	// It is in the list of every notification, found by status, site and word.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#items"))))
	_, err = chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("#all-notifications"))))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("select[name=status]"), "Delivered"),
		chromedp.SetValue(chromedp.CSS("input[name=site]"), s.cfg.Site.ID),
		chromedp.SetValue(chromedp.CSS("input[name=q]"), "tripped"),
	))
	_, err = chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("form.filter button"))))
	require.NoError(t, err)
	require.Contains(t, text(t, ctx, "#n-"+note), subject)
	screenshot(t, ctx, chromedp.FullScreenshot(100), "outbox-notifications.png")
}

// signInAs fills the login form the page sent the browser to, and waits for
// the page.
func signInAs(t *testing.T, ctx context.Context, user, password string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS("#sign-in")),
		chromedp.SetValue(chromedp.CSS("input[name=user]"), user),
		chromedp.SetValue(chromedp.CSS("input[name=password]"), password),
	))
	_, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS("#sign-in"))))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#items"))))
}

func bcryptHash(t *testing.T, password string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	require.NoError(t, err)
	return string(h)
}

// newBrowser starts headless Chromium for the test, with the flags it needs
// as root in a container.
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// submit clicks a form's button and waits for the page it leads to (the
// action redirects back to the list) to load.
func submit(t *testing.T, ctx context.Context, button string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(button))))
	require.NoError(t, err, button)
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(".flash.ok"))))
}

// text is the visible text of the first element matching the CSS selector.
func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	require.NoError(t, err, css)
	return strings.TrimSpace(s)
}

// parkOneOfEach parks a notification (SMTP stopped) and a cached call (erp
// answering 503 from now on, its params holding a secret the site redacts)
// and returns their ids.
func (s *stack) parkOneOfEach(subject, sku string) (noteID string, call site.CallResult) {
	s.t.Helper()
	s.stopSMTP()
	noteID = s.notify("ops", subject)
	s.demo.FailNext(-1, http.StatusServiceUnavailable)
	call, code := s.call("erp", "createOrder", map[string]any{"sku": sku, "password": "hunter2"})
	require.Equal(s.t, http.StatusAccepted, code, "a 503 is transient: %s", call.Error)
	s.waitStatus(contract.StatusParked, time.Minute, noteID)
	s.waitOperation(call.ID, contract.StatusParked, time.Minute)
	return noteID, call
}

// chromiumOrSkip is the path of Debian's headless chromium; the test skips
// without it.
func chromiumOrSkip(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("headless Chromium not installed: apt-get install chromium (CI installs it)")
	}
	return path
}

// screenshot takes a PNG of the page with shot and, when
// OUTPOST_SCREENSHOTS=1, writes it to docs/name, where the docs show it.
func screenshot(t *testing.T, ctx context.Context, shot chromedp.Action[[]byte], name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, shot)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")), "a PNG screenshot")
	if os.Getenv("OUTPOST_SCREENSHOTS") == "1" {
		dir := filepath.Join("..", "..", "docs")
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), png, 0o644))
	}
}
