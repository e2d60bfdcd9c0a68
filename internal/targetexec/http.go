package targetexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/internal/httpanswer"
	"github.com/outpost-dev/outpost/internal/targets"
)

const (
	// maxBody caps the response body kept in a Result.
	maxBody = 1 << 20
	// maxExcerpt caps the body quoted in a Failure's message.
	maxExcerpt = 500
	// maxRedirects matches net/http's default.
	maxRedirects = 10
)

// authHeaderKey carries the request's auth header name to CheckRedirect.
type authHeaderKey struct{}

func newHTTPClient() *http.Client {
	return &http.Client{
		Transport:     http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: checkRedirect,
	}
}

// checkRedirect drops the auth header when a redirect leaves the host:
// net/http does so itself only for Authorization, and a system's header
// may be any name.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if name, ok := req.Context().Value(authHeaderKey{}).(string); ok && req.URL.Host != via[0].URL.Host {
		req.Header.Del(name)
	}
	return nil
}

// call makes one HTTP attempt.
func (e *Executor) call(ctx context.Context, req targets.Request) (targets.Result, error) {
	sys, _ := e.defs.ExternalSystem(req.System) // Execute validated req
	timeout := sys.TimeoutOrDefault()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := newHTTPRequest(ctx, sys, sys.Methods[req.Method], req.Params)
	if err != nil {
		return targets.Result{}, err
	}
	if req.IdempotencyKey != "" {
		hreq.Header.Set(idempotencyHeader(sys), req.IdempotencyKey)
	}
	secret := sys.AuthValue()
	resp, err := e.client.Do(hreq)
	if err != nil {
		return targets.Result{}, networkFailure(ctx, timeout, err, secret)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return targets.Result{}, networkFailure(ctx, timeout, fmt.Errorf("read response: %w", err), secret)
	}
	return outcome(resp, body, secret)
}

// idempotencyHeader names the header that carries a call's idempotency key.
func idempotencyHeader(sys targets.ExternalSystem) string {
	if sys.IdempotencyHeader == "" {
		return targets.DefaultIdempotencyHeader
	}
	return sys.IdempotencyHeader
}

// newHTTPRequest builds the request for method m of sys with params.
func newHTTPRequest(ctx context.Context, sys targets.ExternalSystem, m targets.Method, params map[string]any) (*http.Request, error) {
	path, rest, err := targets.ExpandPath(m.Path, params)
	if err != nil {
		return nil, err
	}
	if path != "" && !strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "?") {
		path = "/" + path
	}
	u, err := url.Parse(strings.TrimRight(sys.BaseURL, "/") + path)
	if err != nil {
		return nil, &targets.InvalidError{Field: "system", Reason: "base_url and path do not form a URL: " + err.Error()}
	}
	verb := strings.ToUpper(m.Verb)
	if verb == "" {
		verb = http.MethodPost
	}
	var body io.Reader
	if sendsBody(verb) {
		b, err := json.Marshal(rest)
		if err != nil {
			return nil, &targets.InvalidError{Field: "params", Reason: "cannot be encoded as JSON: " + err.Error()}
		}
		body = bytes.NewReader(b)
	} else if len(rest) > 0 {
		q := u.Query()
		for k, v := range rest {
			q.Set(k, queryValue(v))
		}
		u.RawQuery = q.Encode()
	}
	header := sys.AuthHeader
	if header == "" {
		header = "Authorization"
	}
	ctx = context.WithValue(ctx, authHeaderKey{}, header)
	hreq, err := http.NewRequestWithContext(ctx, verb, u.String(), body)
	if err != nil {
		return nil, &targets.InvalidError{Field: "system", Reason: "cannot build the request: " + err.Error()}
	}
	hreq.Header.Set("Accept", "application/json")
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if v := sys.AuthValue(); v != "" {
		hreq.Header.Set(header, v)
	}
	return hreq, nil
}

func sendsBody(verb string) bool {
	return verb == http.MethodPost || verb == http.MethodPut || verb == http.MethodPatch
}

// queryValue formats a parameter for the query string: scalars as fmt
// prints them, objects and arrays as JSON (fmt would print Go syntax).
func queryValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case map[string]any, []any:
		b, _ := json.Marshal(x) // checkValues has already marshalled it
		return string(b)
	}
	return fmt.Sprint(v)
}

// outcome turns a response into a Result or a *Failure.
func outcome(resp *http.Response, body []byte, secret string) (targets.Result, error) {
	ok, permanent := httpanswer.Classify(resp.StatusCode)
	if ok {
		return targets.Result{HTTPStatus: resp.StatusCode, Body: jsonBody(body)}, nil
	}
	msg := "HTTP " + resp.Status
	if ex := excerpt(body); ex != "" {
		msg += ": " + ex
	}
	return targets.Result{}, &targets.Failure{Permanent: permanent, Code: resp.StatusCode, Message: redact(msg, secret),
		RetryAfter: retryAfter(resp, time.Now())}
}

// retryAfter is the wait a 429 or 503 answer asks for in its Retry-After
// header (seconds, or an HTTP date), 0 when none or unreadable.
func retryAfter(resp *http.Response, now time.Time) time.Duration {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0
	}
	return httpanswer.RetryAfter(resp.Header.Get("Retry-After"), now)
}

// jsonBody is body as JSON: itself when it is JSON, else a JSON string.
func jsonBody(body []byte) json.RawMessage {
	if len(body) == 0 {
		return nil
	}
	if len(body) > maxBody {
		// Cut JSON is no longer JSON.
		body = body[:maxBody]
	} else if json.Valid(body) {
		return json.RawMessage(body)
	}
	b, _ := json.Marshal(string(body)) // a string always marshals
	return b
}

// excerpt is the start of body for a message, cut on a rune boundary.
func excerpt(body []byte) string {
	b := bytes.TrimSpace(body)
	if len(b) <= maxExcerpt {
		return string(b)
	}
	n := maxExcerpt
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "..."
}

// networkFailure is a transient failure for a request that got no
// response: the target may be back on the next attempt.
func networkFailure(ctx context.Context, timeout time.Duration, err error, secret string) *targets.Failure {
	msg := err.Error()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		msg = fmt.Sprintf("no response within %s: %s", timeout, msg)
	}
	return &targets.Failure{Message: redact(msg, secret), Err: err}
}
