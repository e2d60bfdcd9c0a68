package smtpsink

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/notification"
)

// send mails raw over SMTP to the sink.
func send(t *testing.T, sink *Sink, from, to, raw string) {
	t.Helper()
	require.NoError(t, smtp.SendMail(sink.Addr(), nil, from, []string{to}, []byte(strings.ReplaceAll(raw, "\n", "\r\n"))))
}

func get(t *testing.T, url, accept string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

// A browser gets a page listing the messages newest first, each opening
// onto its raw message, everything escaped; anyone else gets the JSON.
func TestPageIsHTMLForABrowserAndJSONOtherwise(t *testing.T) {
	t.Parallel()
	sink, err := Start("127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	first := "From: outpost@example.com\nTo: ops@example.com\nSubject: Pump 3 tripped\n" +
		notification.HeaderNotificationID + ": n-first\n\nPressure low\n"
	second := "From: outpost@example.com\nTo: shift@example.com\nSubject: <script>alert(1)</script> & more\n" +
		notification.HeaderNotificationID + ": n-second\n\nBody with <b>markup</b>\n"
	send(t, sink, "outpost@example.com", "ops@example.com", first)
	send(t, sink, "outpost@example.com", "shift@example.com", second)
	page := httptest.NewServer(sink)
	defer page.Close()

	resp, body := get(t, page.URL, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	require.NotContains(t, body, "<script>alert(1)</script>")
	require.NotContains(t, body, "<b>markup</b>")
	second2 := strings.Index(body, "n-second")
	first2 := strings.Index(body, "n-first")
	require.True(t, second2 > 0 && first2 > second2, "newest first:\n%s", body)
	for _, want := range []string{
		"<details>", "ops@example.com", "shift@example.com", "Pump 3 tripped",
		html.EscapeString("<script>alert(1)</script> & more"),
		// The raw message, headers and body as received, escaped.
		html.EscapeString(strings.ReplaceAll(second, "\n", "\r\n")),
		html.EscapeString(strings.ReplaceAll(first, "\n", "\r\n")),
	} {
		require.Contains(t, body, want)
	}

	for _, accept := range []string{"", "application/json", "*/*"} {
		resp, body = get(t, page.URL, accept)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), accept)
		var got struct {
			Count    int       `json:"count"`
			Messages []Message `json:"messages"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &got), accept)
		require.Equal(t, 2, got.Count)
		require.Equal(t, "n-second", got.Messages[0].NotificationID)
		require.Equal(t, "<script>alert(1)</script> & more", got.Messages[0].Subject)
		require.Equal(t, "Body with <b>markup</b>\r\n", got.Messages[0].Body)
		require.NotContains(t, body, "raw", "the JSON stays as it was")
	}
}
