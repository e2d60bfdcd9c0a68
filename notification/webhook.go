package notification

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/targets"
)

// The Standard Webhooks headers (https://www.standardwebhooks.com) every
// webhook POST carries, so that a receiver verifies it with that
// specification's library in its own language.
const (
	// HeaderWebhookID is the notification id, the same on every attempt:
	// a receiver that sees it twice drops the copy.
	HeaderWebhookID = "webhook-id"
	// HeaderWebhookTimestamp is when the POST was signed, in Unix seconds:
	// a receiver refuses one signed too long ago (a captured POST sent
	// again).
	HeaderWebhookTimestamp = "webhook-timestamp"
	// HeaderWebhookSignature is "v1,BASE64": the HMAC-SHA256 of
	// "ID.TIMESTAMP.BODY" (see SignStandard).
	HeaderWebhookSignature = "webhook-signature"
)

// HeaderLegacySignature is the previous signature, "t=UNIX,v1=HEX" with HEX
// the HMAC-SHA256, keyed with the secret variable's text, of "UNIX.BODY".
// It is sent only to lists with legacy_signature and through channels whose
// secret is still plain, and is removed in the next release.
const HeaderLegacySignature = "X-Outpost-Signature"

// whsecPrefix marks a Standard Webhooks secret: the base64 of the key.
const whsecPrefix = "whsec_"

// The key sizes the Standard Webhooks specification allows.
const (
	minSecretBytes = 24
	maxSecretBytes = 64
)

// makeSecretHint says how to make a good secret.
const makeSecretHint = `make one with: echo "whsec_$(openssl rand -base64 32)"`

// Webhook POSTs the notification as JSON to every target, signed with the
// list's webhook channel's secret.
type Webhook struct {
	poster poster
	log    *zap.Logger
}

// NewWebhook returns the Webhook adapter; client, now and log may be nil.
func NewWebhook(client *http.Client, now func() time.Time, log *zap.Logger) Webhook {
	if log == nil {
		log = zap.NewNop()
	}
	return Webhook{poster: newPoster(client, now), log: log}
}

// WebhookPayload is the JSON body of a webhook POST.
type WebhookPayload struct {
	NotificationID string    `json:"notificationId"`
	List           string    `json:"list"`
	Subject        string    `json:"subject"`
	Body           string    `json:"body"`
	SourceSite     string    `json:"sourceSite"`
	SourceInstance string    `json:"sourceInstance,omitempty"`
	SourceScript   string    `json:"sourceScript,omitempty"`
	SiteEnqueuedAt time.Time `json:"siteEnqueuedAt"`
	Link           string    `json:"link,omitempty"`
}

// Deliver posts the signed payload to every target.
func (a Webhook) Deliver(ctx context.Context, m Message) error {
	secret, err := webhookSecret(m)
	if err != nil {
		return err
	}
	var data WebhookData
	if err := json.Unmarshal([]byte(orEmpty(m.ListData)), &data); err != nil {
		return &targets.Failure{Permanent: true, Misconfigured: true, Err: fmt.Errorf("list %q: type_data: %w", m.List, err)}
	}
	body, err := json.Marshal(WebhookPayload{
		NotificationID: m.ID, List: m.List, Subject: m.Subject, Body: m.Body,
		SourceSite: m.SourceSite, SourceInstance: m.SourceInstance, SourceScript: m.SourceScript,
		SiteEnqueuedAt: m.SiteEnqueuedAt, Link: m.Link,
	})
	if err != nil {
		return &targets.Failure{Permanent: true, Err: err}
	}
	if secret.Plain {
		a.warnPlain(m, secret)
	}
	header := http.Header{}
	for k, v := range data.Headers {
		header.Set(k, v)
	}
	header.Set(HeaderNotificationID, m.ID)
	sign(header, secret, data.LegacySignature || secret.Plain, m.ID, a.poster.now(), body)
	return a.poster.postAll(ctx, m.Targets, body, header)
}

// sign sets the signature headers of body, message id signed at: the
// Standard Webhooks ones, and the legacy one too when asked. Signed at each
// attempt, so that a retry carries a fresh time (receivers refuse old ones)
// under the same webhook-id.
func sign(header http.Header, secret WebhookSecret, legacy bool, id string, at time.Time, body []byte) {
	header.Set(HeaderWebhookID, id)
	header.Set(HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	header.Set(HeaderWebhookSignature, SignStandard(secret.Key, id, at, body))
	if legacy {
		header.Set(HeaderLegacySignature, signLegacy([]byte(secret.Text), at, body))
	}
}

// warnPlain logs, at each delivery through m's channel while its secret is
// plain, that it still works and how to replace it (never the secret).
func (a Webhook) warnPlain(m Message, secret WebhookSecret) {
	a.log.Warn("webhook channel's secret is not a whsec_ secret: still sending X-Outpost-Signature, which the next release removes",
		zap.String("channel", m.Channel.Name), zap.String("list", m.List),
		zap.String("fix", "set $"+secret.Env+" on every central worker to a Standard Webhooks secret ("+makeSecretHint+") and give it to the receivers"))
}

// WebhookSecret is a webhook channel's signing secret.
type WebhookSecret struct {
	// Key signs webhook-signature: the base64-decoded part after whsec_,
	// or a plain secret's own bytes.
	Key []byte
	// Text is the variable's text, which keys HeaderLegacySignature as
	// before Standard Webhooks.
	Text string
	// Plain: the secret has no whsec_ prefix (made before Outpost signed
	// per Standard Webhooks). It still works; see Deliver.
	Plain bool
	// Env is the variable the secret was read from ("" when parsed from
	// text).
	Env string
}

// ParseWebhookSecret reads a webhook secret: "whsec_" and the base64 of 24
// to 64 random bytes (the Standard Webhooks form), or any other text, a
// plain secret. A whsec_ secret that is not valid base64 of such a key is
// an error, not a plain secret: the receiver's library would not read it.
func ParseWebhookSecret(text string) (WebhookSecret, error) {
	encoded, ok := strings.CutPrefix(text, whsecPrefix)
	if !ok {
		return WebhookSecret{Key: []byte(text), Text: text, Plain: true}, nil
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return WebhookSecret{}, fmt.Errorf("after whsec_ is not base64 (%v): want the base64 of 24 to 64 random bytes; %s", err, makeSecretHint)
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return WebhookSecret{}, fmt.Errorf("after whsec_ is the base64 of %d bytes: want 24 to 64 random bytes; %s", len(key), makeSecretHint)
	}
	return WebhookSecret{Key: key, Text: text}, nil
}

// webhookSecret reads the signing secret of m's channel. Without one, or
// with one that is not valid, the POST is not sent: receivers must be able
// to trust what arrives.
func webhookSecret(m Message) (WebhookSecret, error) {
	if m.Channel == nil {
		return WebhookSecret{}, &targets.Failure{Permanent: true, Misconfigured: true, Err: fmt.Errorf("webhook list %q %w", m.List, errNoChannel)}
	}
	var s WebhookSettings
	if err := json.Unmarshal([]byte(m.Channel.Settings), &s); err != nil {
		return WebhookSecret{}, &targets.Failure{Permanent: true, Misconfigured: true, Err: fmt.Errorf("channel %q: settings: %w", m.Channel.Name, err)}
	}
	text := os.Getenv(s.SecretEnv)
	if text == "" {
		return WebhookSecret{}, &targets.Failure{Permanent: true, Misconfigured: true, Err: fmt.Errorf("channel %q: $%s (its secret_env) is not set on this central worker", m.Channel.Name, s.SecretEnv)}
	}
	secret, err := ParseWebhookSecret(text)
	if err != nil {
		return WebhookSecret{}, &targets.Failure{Permanent: true, Misconfigured: true, Err: fmt.Errorf("channel %q: $%s (its secret_env): %w", m.Channel.Name, s.SecretEnv, err)}
	}
	secret.Env = s.SecretEnv
	return secret, nil
}

// SignStandard is the HeaderWebhookSignature value of body sent as message
// msgID at t: "v1," and the base64 of the HMAC-SHA256, keyed with key, of
// "MSGID.UNIX.BODY".
func SignStandard(key []byte, msgID string, t time.Time, body []byte) string {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msgID + "." + strconv.FormatInt(t.Unix(), 10) + "."))
	h.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// signLegacy is the HeaderLegacySignature value of body sent at t.
func signLegacy(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts + "."))
	h.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(h.Sum(nil))
}
