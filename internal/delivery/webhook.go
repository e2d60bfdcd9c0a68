package delivery

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// HeaderSignature signs a webhook POST: "t=UNIX,v1=HEX", where HEX is the
// HMAC-SHA256, keyed with the channel's secret, of "UNIX.BODY" (the scheme
// Stripe uses). Signing the time lets a receiver refuse an old POST sent
// again by someone who captured it.
const HeaderSignature = "X-Outpost-Signature"

// Webhook POSTs the notification as JSON to every target, signed with the
// list's webhook channel's secret.
type Webhook struct {
	poster poster
}

// NewWebhook returns the Webhook adapter; client and now may be nil.
func NewWebhook(client *http.Client, now func() time.Time) Webhook {
	return Webhook{poster: newPoster(client, now)}
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
func (a Webhook) Deliver(ctx context.Context, d Delivery) error {
	secret, err := webhookSecret(d)
	if err != nil {
		return err
	}
	var data WebhookData
	if err := json.Unmarshal([]byte(orEmpty(d.List.TypeData)), &data); err != nil {
		return &Error{Permanent: true, Err: fmt.Errorf("list %q: type_data: %w", d.List.Name, err)}
	}
	n := d.Notification
	body, err := json.Marshal(WebhookPayload{
		NotificationID: n.NotificationID, List: n.ListName, Subject: n.Subject, Body: n.Body,
		SourceSite: n.SourceSiteID, SourceInstance: n.SourceInstanceID, SourceScript: n.SourceScript,
		SiteEnqueuedAt: n.SiteEnqueuedAt, Link: d.Link,
	})
	if err != nil {
		return &Error{Permanent: true, Err: err}
	}
	header := http.Header{}
	for k, v := range data.Headers {
		header.Set(k, v)
	}
	header.Set(HeaderNotificationID, n.NotificationID)
	header.Set(HeaderSignature, Sign(secret, a.poster.now(), body))
	return a.poster.postAll(ctx, d.Targets, body, header)
}

// webhookSecret reads the signing secret of d's channel. Without one the
// POST is not sent: receivers must be able to trust what arrives.
func webhookSecret(d Delivery) ([]byte, error) {
	if d.Channel == nil {
		return nil, &Error{Permanent: true, Err: fmt.Errorf("webhook list %q %w", d.List.Name, errNoChannel)}
	}
	var s WebhookSettings
	if err := json.Unmarshal([]byte(d.Channel.Settings), &s); err != nil {
		return nil, &Error{Permanent: true, Err: fmt.Errorf("channel %q: settings: %w", d.Channel.Name, err)}
	}
	secret := os.Getenv(s.SecretEnv)
	if secret == "" {
		return nil, &Error{Permanent: true, Err: fmt.Errorf("channel %q: $%s (its secret_env) is not set on this central worker", d.Channel.Name, s.SecretEnv)}
	}
	return []byte(secret), nil
}

// Sign is the HeaderSignature value of body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts + "."))
	h.Write(body)
	return h.Sum(nil)
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("signature does not match the body")
	ErrStale        = errors.New("signature is too old")
)

// Verify checks a HeaderSignature value against body, as a receiver in Go
// would: the MAC must match and the time be within tolerance of now.
func Verify(secret []byte, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return fmt.Errorf("%w: want t=UNIX,v1=HEX, got %q", ErrBadSignature, header)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(secret, ts, body)) {
		return ErrBadSignature
	}
	if age := now.Sub(time.Unix(unix, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed %s ago, tolerance %s", ErrStale, age.Round(time.Second), tolerance)
	}
	return nil
}
