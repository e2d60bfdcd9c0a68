package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// The operator's view in the Temporal Web UI, served by the pinned dev
// server and read in a real headless Chromium: the workflow list filtered
// by OutpostStatus="Parked" shows a notification parked while SMTP is down
// and a call parked while its target fails, and not a notification
// delivered before; unfiltered, the list does show that one, so its absence
// is the filter's doing. OUTPOST_SCREENSHOTS=1 writes the filtered list to
// docs/webui-parked.png.
func TestWebUIListsParkedWorkflows(t *testing.T) {
	chromium := chromiumOrSkip(t)
	s := newStack(t, nil, withWebUI())
	delivered := s.notify("ops", "Shift report line 2")
	s.waitStatus(contract.StatusDelivered, time.Minute, delivered)

	note, call := s.parkOneOfEach("Pump 3 tripped", "web-ui")
	// Visibility lags the workflows a little; the UI reads visibility.
	const parkedQuery = `OutpostStatus="Parked"`
	s.waitParkedCount(parkedQuery, 2, 30*time.Second)

	parked := []string{contract.NotificationWorkflowID(note), contract.CachedCallWorkflowID(call.ID)}
	deliveredID := contract.NotificationWorkflowID(delivered)
	list := s.uiURL() + "/namespaces/" + s.cfg.Temporal.Namespace + "/workflows"
	ctx := newBrowser(t, chromium)

	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1600, 480),
		chromedp.Navigate(list+"?"+url.Values{"query": {parkedQuery}}.Encode()),
	))
	body := waitPageText(t, ctx, 2*time.Minute, parked...)
	require.NotContains(t, body, deliveredID, "the filter leaves out what was delivered")

	screenshot(t, ctx, chromedp.CaptureScreenshot(), "webui-parked.png")

	// Unfiltered, the delivered notification is listed beside the parked ones.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(list)))
	waitPageText(t, ctx, time.Minute, append(parked, deliveredID)...)
}

// waitPageText polls the page's visible text until it contains every one of
// want, and returns it: a single-page app renders after its API calls answer.
func waitPageText(t *testing.T, ctx context.Context, timeout time.Duration, want ...string) string {
	t.Helper()
	var body string
	var lastErr error
	testutil.WaitFor(t, timeout, func() bool {
		body, lastErr = chromedp.Run(ctx, chromedp.Evaluate[string]("document.body ? document.body.innerText : ''"))
		if lastErr != nil {
			return false
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return false
			}
		}
		return true
	}, func() string {
		return fmt.Sprintf("%s in the page (last error %v), page text:\n%s", strings.Join(want, ", "), lastErr, body)
	})
	return body
}
