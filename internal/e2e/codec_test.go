package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/fromconfig"
)

// writeKey writes a new random payload key to a file and returns its config.
func writeKey(t *testing.T, id string) config.EncryptionKey {
	t.Helper()
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), id+".key")
	require.NoError(t, os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(secret)), 0o600))
	return config.EncryptionKey{ID: id, File: path}
}

// With payload encryption on, a notification, a cached call and a cached
// write that went through Temporal leave no trace of what they carried in
// `temporal workflow show -o json`; the same command with central's codec
// server as --codec-endpoint, and the Web UI with it as its codec endpoint
// (Chromium), show it. After a key rotation (new key first, old key kept)
// the old workflows still decode. OUTPOST_SCREENSHOTS=1 writes the Web UI's
// decoded view to docs/webui-codec.png.
func TestEncryptedPayloadsReadOnlyThroughCodecServer(t *testing.T) {
	chromium := chromiumOrSkip(t)
	const marker = "MARKER-7f3a"
	k1 := writeKey(t, "k1")
	s := newStack(t, func(c *config.Config) {
		c.Temporal.EncryptionKeys = []config.EncryptionKey{k1}
	}, withWebUICodec())

	note := s.notify("ops", "Pump 3 "+marker) // the body repeats the subject
	s.demo.FailNext(1, http.StatusServiceUnavailable)
	call, code := s.call("erp", "createOrder", map[string]any{"sku": marker})
	require.Equal(t, http.StatusAccepted, code, call.Error)
	archive := s.cfg.Site.Databases["archive"].DSN
	write, code := s.write("archive", `INSERT INTO readings (tag, value) VALUES (?, ?)`, marker, 1)
	require.Equal(t, http.StatusAccepted, code, "a missing database file is transient: %s", write.Error)
	s.waitOperation(write.ID, contract.StatusRetrying, 30*time.Second)
	createReadings(t, archive)
	s.waitStatus(contract.StatusDelivered, time.Minute, note)
	s.waitOperation(call.ID, contract.StatusDelivered, time.Minute)
	s.waitOperation(write.ID, contract.StatusDelivered, time.Minute)

	bin, err := devserver.TemporalBinary(t.Context())
	require.NoError(t, err)
	ids := []string{contract.NotificationWorkflowID(note), contract.CachedCallWorkflowID(call.ID), contract.CachedCallWorkflowID(write.ID)}
	for _, id := range ids {
		show := []string{"workflow", "show", "-o", "json", "--address", s.cfg.Temporal.Address, "--namespace", s.cfg.Temporal.Namespace, "--workflow-id", id}
		out, err := exec.Command(bin, show...).CombinedOutput()
		require.NoError(t, err, "temporal workflow show %s:\n%s", id, out)
		require.NotContains(t, withPayloadsDecoded(t, out), marker, "%s without the codec server", id)

		out, err = exec.Command(bin, append(show, "--codec-endpoint", s.centralURL+"/codec")...).CombinedOutput()
		require.NoError(t, err, "temporal workflow show --codec-endpoint %s:\n%s", id, out)
		require.Contains(t, withPayloadsDecoded(t, out), marker, "%s through the codec server", id)
	}

	// Rotation: a client whose newest key is k2 still reads k1's workflows.
	rotated, err := fromconfig.PayloadCodec([]config.EncryptionKey{writeKey(t, "k2"), k1})
	require.NoError(t, err)
	iter := s.server.Client().GetWorkflowHistory(t.Context(), ids[0], "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var input []*commonpb.Payload // the submission: the start's input
	for input == nil && iter.HasNext() {
		event, err := iter.Next()
		require.NoError(t, err)
		input = event.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads()
	}
	require.NotEmpty(t, input)
	decoded, err := rotated.Decode(input)
	require.NoError(t, err, "the rotated key set decodes what the old key wrote")
	require.Contains(t, string(decoded[0].Data), "body of Pump 3 "+marker)

	// The Web UI decodes through the codec server it was started with.
	ctx := newBrowser(t, chromium)
	require.NoError(t, chromedp.Do(ctx,
		chromedp.EmulateViewport(1600, 1000),
		chromedp.Navigate(s.uiURL()+"/namespaces/"+s.cfg.Temporal.Namespace+"/workflows/"+url.PathEscape(ids[0])),
	))
	// The summary is encrypted too: readable only through the codec server.
	waitPageText(t, ctx, 2*time.Minute, "Notify ops: Pump 3 "+marker)
	// Open the start that carried the submission: its decoded body shows.
	clicked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const row = [...document.querySelectorAll('tr[data-testid="event-summary-row"]')]
			.find(r => r.innerText.includes('Workflow Execution Started'));
		if (row) row.click();
		return !!row;
	})()`))
	require.NoError(t, err)
	require.True(t, clicked, "the event history lists the start")
	waitPageText(t, ctx, time.Minute, "body of Pump 3 "+marker)
	screenshot(t, ctx, chromedp.CaptureScreenshot(), "webui-codec.png")
}

// withPayloadsDecoded is the JSON of `temporal workflow show -o json`
// followed by every base64 "data" field in it decoded: payload bytes are
// printed as base64, which hides a marker from a plain search.
func withPayloadsDecoded(t *testing.T, out []byte) string {
	t.Helper()
	var doc any
	require.NoError(t, json.Unmarshal(out, &doc), "%s", out)
	var b strings.Builder
	b.Write(out)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if str, ok := child.(string); ok && k == "data" {
					if raw, err := base64.StdEncoding.DecodeString(str); err == nil {
						b.WriteString("\n")
						b.Write(raw)
					}
				}
				walk(child)
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(doc)
	return b.String()
}

// site.workflow_summary: list-only keeps the subject out of the summary the
// Web UI shows everyone (here without payload encryption: plain text).
func TestListOnlySummaryInTemporal(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Site.WorkflowSummary = config.SummaryListOnly })
	id := s.notify("ops", "Pump 3 tripped")
	s.waitStatus(contract.StatusDelivered, time.Minute, id)
	desc, err := s.client.DescribeWorkflowExecution(t.Context(), contract.NotificationWorkflowID(id), "")
	require.NoError(t, err)
	var summary string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(desc.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary))
	require.Equal(t, "Notify ops", summary)
}
