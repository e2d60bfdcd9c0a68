package notification

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/internal/httpanswer"
	"github.com/outpost-dev/outpost/internal/targets"
)

// HeaderNotificationID carries the notification id on every email, Teams
// and webhook POST: a receiver that sees the same id twice (a retry after an
// answer that never arrived) can drop the copy.
const HeaderNotificationID = "X-Outpost-Notification-Id"

// httpTimeout bounds one POST when the attempt's own deadline is later.
const httpTimeout = 30 * time.Second

// poster makes the HTTP POSTs of the Teams and Webhook adapters.
type poster struct {
	client *http.Client
	now    func() time.Time
}

func newPoster(client *http.Client, now func() time.Time) poster {
	if client == nil {
		client = &http.Client{
			Timeout: httpTimeout,
			// A redirect would turn the POST into a GET or send the body
			// somewhere nobody configured: report it instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if now == nil {
		now = time.Now
	}
	return poster{client: client, now: now}
}

// postAll posts body to every target and stops at the first failure. A
// retry posts to every target again; receivers recognise a copy by
// HeaderNotificationID.
func (p poster) postAll(ctx context.Context, targets []string, body []byte, header http.Header) error {
	for _, target := range targets {
		if err := p.post(ctx, target, body, header); err != nil {
			return err
		}
	}
	return nil
}

func (p poster) post(ctx context.Context, target string, body []byte, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return &targets.Failure{Permanent: true, Err: fmt.Errorf("POST %s: %w", redactURL(target), err)}
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		// Never answered, or the connection failed: the receiver may have
		// it; the retry carries the same notification id.
		return &targets.Failure{Err: fmt.Errorf("POST %s: %w", redactURL(target), stripURL(err))}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return p.classify(target, resp, answer)
}

// classify reads an answer by httpanswer's rule: 2xx delivered; 408, 429
// and 5xx transient (waiting Retry-After when given, up to MaxRetryAfter);
// anything else permanent.
func (p poster) classify(target string, resp *http.Response, answer []byte) error {
	code := resp.StatusCode
	ok, permanent := httpanswer.Classify(code)
	if ok {
		return nil
	}
	err := fmt.Errorf("POST %s: %s: %s", redactURL(target), resp.Status, strings.TrimSpace(string(answer)))
	if !permanent {
		return &targets.Failure{Code: code, RetryAfter: min(httpanswer.RetryAfter(resp.Header.Get("Retry-After"), p.now()), MaxRetryAfter), Err: err}
	}
	if code >= 300 && code < 400 {
		err = fmt.Errorf("%w (redirected to %s: put the final URL in the list)", err, redactURL(resp.Header.Get("Location")))
	}
	return &targets.Failure{Permanent: true, Code: code, Err: err}
}

// stripURL drops the URL (with a Teams URL's signature) from a client
// error; the caller names the target without its query.
func stripURL(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}
