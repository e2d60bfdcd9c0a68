package notification_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/notification"
)

// testSecret is a Standard Webhooks secret: whsec_ and 32 random bytes.
const testSecret = "whsec_lc7GvMHJwUlZ+cvUN586pEc3kwgBCCA9JUNGTwyFFDg="

// standardVectors are the Standard Webhooks specification's published
// signatures (its reference libraries' tests: the first in the Go, Python
// and JavaScript ones, the second in the Rust one).
var standardVectors = []struct {
	secret, msgID string
	timestamp     int64
	payload, want string
}{
	{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
		`{"test": 2432232314}`, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
	{"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD", "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk", 1649367553,
		`{"email":"test@example.com","username":"test_user"}`, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="},
}

func TestSignStandardMatchesThePublishedVectors(t *testing.T) {
	t.Parallel()
	for _, v := range standardVectors {
		secret, err := notification.ParseWebhookSecret(v.secret)
		require.NoError(t, err)
		require.False(t, secret.Plain)
		require.Equal(t, v.want, notification.SignStandard(secret.Key, v.msgID, time.Unix(v.timestamp, 0), []byte(v.payload)), v.msgID)
	}
}

func TestParseWebhookSecret(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		testSecret,
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // 24 bytes, the least the specification allows
		"whsec_yiR7kz24adVXUEsF+hg1WJx6ECBqNRVXM2OoV1d/dEHdjHHQbKYlM4Cm0zB0BC2Ar/j7CC7Jl2hruYw5sQ1LRQ==", // 64, the most
	} {
		s, err := notification.ParseWebhookSecret(ok)
		require.NoError(t, err, ok)
		require.False(t, s.Plain)
		require.GreaterOrEqual(t, len(s.Key), 24)
	}
	for bad, want := range map[string]string{
		"whsec_":                           "24 to 64",
		"whsec_not base64!":                "not base64",
		"whsec_+cobxsohXilkRBLU6wBP6g==":   "16 bytes",
		"whsec_" + strings.Repeat("A", 88): "66 bytes",
	} {
		_, err := notification.ParseWebhookSecret(bad)
		require.ErrorContains(t, err, want, bad)
		require.ErrorContains(t, err, "openssl rand -base64 32", bad)
	}
	plain, err := notification.ParseWebhookSecret("s3cret-shared-with-the-receiver")
	require.NoError(t, err)
	require.True(t, plain.Plain)
	require.Equal(t, []byte("s3cret-shared-with-the-receiver"), plain.Key)
}

// libraryReceiver is a webhook receiver written as docs/notifications.md tells one to
// be: the official Standard Webhooks library verifies every POST with the
// channel's secret, and a POST that fails is refused with 401.
type libraryReceiver struct {
	verifier *standardwebhooks.Webhook
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	errs     []error
}

func (r *libraryReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	err := r.verifier.Verify(body, req.Header)
	r.mu.Lock()
	r.bodies, r.headers, r.errs = append(r.bodies, body), append(r.headers, req.Header.Clone()), append(r.errs, err)
	r.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func serveVerified(t *testing.T, verifier *standardwebhooks.Webhook) (*libraryReceiver, string) {
	r := &libraryReceiver{verifier: verifier}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + "/hook"
}

func webhookDelivery(url, typeData string) notification.Message {
	m := message([]string{url}, typeData)
	m.Channel = &notification.Channel{Name: "hooks", Settings: `{"secret_env":"HOOK_SECRET"}`}
	return m
}

// A receiver verifies Outpost's POST with the official library and the
// channel's whsec_ secret; a retry carries the same webhook-id; a tampered
// body, and a POST signed longer ago than the library's tolerance, are
// refused.
func TestWebhookVerifiesWithTheStandardWebhooksLibrary(t *testing.T) {
	t.Setenv("HOOK_SECRET", testSecret)
	verifier, err := standardwebhooks.NewWebhook(testSecret)
	require.NoError(t, err)
	r, url := serveVerified(t, verifier)
	d := webhookDelivery(url, `{"headers":{"X-Plant":"3"}}`)
	hook := notification.NewWebhook(nil, nil, nil)

	require.NoError(t, hook.Deliver(context.Background(), d))
	require.NoError(t, hook.Deliver(context.Background(), d), "a retry")
	require.Len(t, r.bodies, 2)
	for i, header := range r.headers {
		require.NoError(t, r.errs[i])
		require.Equal(t, d.ID, header.Get(standardwebhooks.HeaderWebhookID), "webhook-id is the notification id on every attempt")
		require.Equal(t, "3", header.Get("X-Plant"))
		require.Empty(t, header.Get(notification.HeaderLegacySignature), "the legacy header is off by default")
	}

	tampered := bytes.Replace(r.bodies[0], []byte("Pump 3"), []byte("Pump 4"), 1)
	require.NotEqual(t, r.bodies[0], tampered)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(tampered))
	require.NoError(t, err)
	req.Header = r.headers[0].Clone()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.ErrorIs(t, r.errs[2], standardwebhooks.ErrNoMatchingSignature)

	old := notification.NewWebhook(nil, func() time.Time { return time.Now().Add(-10 * time.Minute) }, nil)
	err = old.Deliver(context.Background(), d)
	var delErr *targets.Failure
	require.ErrorAs(t, err, &delErr)
	require.True(t, delErr.Permanent, "the receiver's 401 parks the notification")
	require.ErrorIs(t, r.errs[3], standardwebhooks.ErrMessageTooOld)
}

// legacySignatureOK checks an X-Outpost-Signature value ("t=UNIX,v1=HEX",
// HEX the HMAC-SHA256 of "UNIX.BODY") as a receiver of the previous scheme
// does.
func legacySignatureOK(secret string, value string, body []byte) bool {
	ts, sig, ok := strings.Cut(strings.TrimPrefix(value, "t="), ",v1=")
	if !ok {
		return false
	}
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(ts + "."))
	h.Write(body)
	return sig == hex.EncodeToString(h.Sum(nil))
}

// A list with legacy_signature also gets X-Outpost-Signature, keyed with
// the variable's text, beside the Standard Webhooks headers.
func TestWebhookLegacySignatureIsAListOption(t *testing.T) {
	t.Setenv("HOOK_SECRET", testSecret)
	verifier, err := standardwebhooks.NewWebhook(testSecret)
	require.NoError(t, err)
	r, url := serveVerified(t, verifier)
	require.NoError(t, notification.NewWebhook(nil, nil, nil).Deliver(context.Background(), webhookDelivery(url, `{"legacy_signature":true}`)))
	require.Len(t, r.bodies, 1)
	require.NoError(t, r.errs[0])
	legacy := r.headers[0].Get(notification.HeaderLegacySignature)
	require.True(t, legacySignatureOK(testSecret, legacy, r.bodies[0]), legacy)
	require.False(t, legacySignatureOK("another", legacy, r.bodies[0]))
}

// A channel whose secret is still a plain one (from before whsec_) keeps
// working: its receivers get X-Outpost-Signature as before, the Standard
// Webhooks signature is keyed with the secret's own bytes, and every
// delivery logs a warning saying how to move on.
func TestWebhookPlainSecretKeepsWorkingWithAWarning(t *testing.T) {
	const plain = "s3cret-shared-with-the-receiver"
	t.Setenv("HOOK_SECRET", plain)
	verifier, err := standardwebhooks.NewWebhookRaw([]byte(plain))
	require.NoError(t, err)
	r, url := serveVerified(t, verifier)
	core, logs := observer.New(zap.WarnLevel)

	require.NoError(t, notification.NewWebhook(nil, nil, zap.New(core)).Deliver(context.Background(), webhookDelivery(url, "")))
	require.Len(t, r.bodies, 1)
	require.NoError(t, r.errs[0])
	require.True(t, legacySignatureOK(plain, r.headers[0].Get(notification.HeaderLegacySignature), r.bodies[0]))
	warnings := logs.All()
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0].Message, "not a whsec_ secret")
	require.Equal(t, "hooks", warnings[0].ContextMap()["channel"])
	require.Contains(t, warnings[0].ContextMap()["fix"], "openssl rand -base64 32")
	require.NotContains(t, warnings[0].Message+warnings[0].ContextMap()["fix"].(string), plain, "the secret is never logged")
}

// A whsec_ secret that is not one is not guessed at: the POST is not sent,
// and the failure says which variable and how to make a good one.
func TestWebhookWithInvalidSecretIsNotSent(t *testing.T) {
	t.Setenv("HOOK_SECRET", "whsec_+cobxsohXilkRBLU6wBP6g==")
	r, url := serve(t, status(http.StatusNoContent))
	err := notification.NewWebhook(nil, nil, nil).Deliver(context.Background(), webhookDelivery(url, ""))
	var delErr *targets.Failure
	require.ErrorAs(t, err, &delErr)
	require.True(t, delErr.Permanent)
	require.True(t, delErr.Misconfigured, "the operator's to fix, not the receiver's refusal")
	require.ErrorContains(t, err, `channel "hooks": $HOOK_SECRET`)
	require.ErrorContains(t, err, "openssl rand -base64 32")
	require.Empty(t, r.bodies)
}
