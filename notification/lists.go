package notification

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// TeamsData is the TypeData of a Teams list.
type TeamsData struct {
	// Style colours the card's title band: default, emphasis, good,
	// attention, warning or accent. Default attention.
	Style string `json:"style,omitempty"`
}

// WebhookData is the TypeData of a Webhook list.
type WebhookData struct {
	// Headers are sent with every POST, beside Content-Type and the
	// X-Outpost-* and webhook-* headers, which they may not replace.
	Headers map[string]string `json:"headers,omitempty"`
	// LegacySignature also sends X-Outpost-Signature, the signature before
	// Standard Webhooks, for receivers not moved yet. Default false; the
	// next release removes it.
	LegacySignature bool `json:"legacy_signature,omitempty"`
}

// SMTPSettings are the Settings of an smtp channel. Timeouts are
// central.smtp's.
type SMTPSettings struct {
	Host        string `json:"host"`
	Port        int    `json:"port"`
	Username    string `json:"username,omitempty"`
	PasswordEnv string `json:"password_env,omitempty"`
	From        string `json:"from"`
	// TLS is none, opportunistic, starttls or tls. Default starttls.
	TLS string `json:"tls,omitempty"`
}

// WebhookSettings are the Settings of a webhook channel.
type WebhookSettings struct {
	// SecretEnv names the central worker's variable that holds the secret
	// signing every POST (receivers hold the same secret): "whsec_" and the
	// base64 of 24 to 64 random bytes (see ParseWebhookSecret).
	SecretEnv string `json:"secret_env"`
}

var teamsStyles = []string{"default", "emphasis", "good", "attention", "warning", "accent"}

var smtpTLSModes = []string{"none", "opportunistic", "starttls", "tls"}

// nameRE is what a list or channel name may hold.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// headerNameRE is an HTTP header name (an RFC 9110 token).
var headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// CheckName refuses a list or channel name that cannot be stored.
func CheckName(what, name string) error {
	if len(name) > centralstore.MaxDefinitionNameChars || !nameRE.MatchString(name) {
		return fmt.Errorf("%s name %q: want 1-%d letters, digits, '.', '_' or '-'",
			what, name, centralstore.MaxDefinitionNameChars)
	}
	return nil
}

// CheckList refuses a list central could not deliver to: an unknown type,
// a target that is not an address (Email) or an http(s) URL (Teams,
// Webhook), TypeData that is not the type's JSON object, or a channel
// missing from channels or of the wrong type. A list without targets is
// allowed: its notifications park until one is added. It returns the list
// with TypeData in canonical form ("{}" when empty).
func CheckList(l centralstore.List, channels map[string]centralstore.Channel) (centralstore.List, error) {
	if err := CheckName("list", l.Name); err != nil {
		return l, err
	}
	if !slices.Contains(contract.NotificationTypes(), l.Type) {
		return l, fmt.Errorf("list %q: type %q: want %s", l.Name, l.Type, strings.Join(contract.NotificationTypes(), ", "))
	}
	for i, t := range l.Targets {
		if err := checkTarget(l.Type, t); err != nil {
			return l, fmt.Errorf("list %q: target %d: %w", l.Name, i+1, err)
		}
	}
	data, err := canonicalTypeData(l.Type, l.TypeData)
	if err != nil {
		return l, fmt.Errorf("list %q: type_data: %w", l.Name, err)
	}
	l.TypeData = data
	if err := checkListChannel(l, channels); err != nil {
		return l, fmt.Errorf("list %q: %w", l.Name, err)
	}
	return l, nil
}

func checkTarget(typ, target string) error {
	if name, ok := strings.CutPrefix(target, envPrefix); ok {
		if !envNameRE.MatchString(name) {
			return fmt.Errorf("%q: after env: give an environment variable name", target)
		}
		return nil
	}
	if typ == contract.NotificationTypeEmail {
		a, err := mail.ParseAddress(target)
		if err != nil || a.Name != "" {
			return fmt.Errorf("%q is not an email address like ops@example.com", target)
		}
		return nil
	}
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL (or env:NAME for one kept in the environment)", redactURL(target))
	}
	return nil
}

// redactURL drops a URL's query, which in a Teams webhook URL is its
// signature.
func redactURL(s string) string {
	before, _, _ := strings.Cut(s, "?")
	return before
}

func checkListChannel(l centralstore.List, channels map[string]centralstore.Channel) error {
	want := map[string]string{contract.NotificationTypeEmail: centralstore.ChannelSMTP, contract.NotificationTypeWebhook: centralstore.ChannelWebhook}[l.Type]
	switch {
	case l.Channel == "" && l.Type == contract.NotificationTypeWebhook:
		return errNoChannel
	case l.Channel == "":
		return nil
	case want == "":
		return fmt.Errorf("channel %q: a %s list takes no channel (its targets are complete URLs)", l.Channel, l.Type)
	}
	c, ok := channels[l.Channel]
	if !ok {
		return fmt.Errorf("channel %q does not exist: create it first with outpost channels set", l.Channel)
	}
	if c.Type != want {
		return fmt.Errorf("channel %q is a %s channel; a %s list needs a %s one", l.Channel, c.Type, l.Type, want)
	}
	return nil
}

// canonicalTypeData checks data against typ's fields and re-encodes it.
func canonicalTypeData(typ, data string) (string, error) {
	switch typ {
	case contract.NotificationTypeTeams:
		var d TeamsData
		if err := decodeStrict(data, &d); err != nil {
			return "", err
		}
		if d.Style != "" && !slices.Contains(teamsStyles, d.Style) {
			return "", fmt.Errorf("style %q: want %s", d.Style, strings.Join(teamsStyles, ", "))
		}
		return encode(d)
	case contract.NotificationTypeWebhook:
		var d WebhookData
		if err := decodeStrict(data, &d); err != nil {
			return "", err
		}
		for name := range d.Headers {
			if !headerNameRE.MatchString(name) {
				return "", fmt.Errorf("headers: %q is not a header name", name)
			}
			if canon := strings.ToLower(name); canon == "content-type" || strings.HasPrefix(canon, "x-outpost-") || strings.HasPrefix(canon, "webhook-") {
				return "", fmt.Errorf("headers: %s is set by Outpost and cannot be replaced", name)
			}
		}
		return encode(d)
	default:
		var d struct{}
		if err := decodeStrict(data, &d); err != nil {
			return "", fmt.Errorf("%w (an Email list has no type fields: use {})", err)
		}
		return "{}", nil
	}
}

// CheckChannel refuses a channel central could not use and returns it with
// Settings in canonical form.
func CheckChannel(c centralstore.Channel) (centralstore.Channel, error) {
	if err := CheckName("channel", c.Name); err != nil {
		return c, err
	}
	var err error
	switch c.Type {
	case centralstore.ChannelSMTP:
		c.Settings, err = canonicalSMTP(c.Settings)
	case centralstore.ChannelWebhook:
		c.Settings, err = canonicalWebhook(c.Settings)
	default:
		return c, fmt.Errorf("channel %q: type %q: want %s or %s", c.Name, c.Type, centralstore.ChannelSMTP, centralstore.ChannelWebhook)
	}
	if err != nil {
		return c, fmt.Errorf("channel %q: settings: %w", c.Name, err)
	}
	return c, nil
}

func canonicalSMTP(settings string) (string, error) {
	var s SMTPSettings
	if err := decodeStrict(settings, &s); err != nil {
		return "", err
	}
	if s.TLS == "" {
		s.TLS = "starttls"
	}
	switch {
	case s.Host == "":
		return "", errors.New("host is required")
	case s.Port < 1 || s.Port > 65535:
		return "", fmt.Errorf("port %d: want 1-65535", s.Port)
	case !slices.Contains(smtpTLSModes, s.TLS):
		return "", fmt.Errorf("tls %q: want %s", s.TLS, strings.Join(smtpTLSModes, ", "))
	case s.PasswordEnv != "" && !envNameRE.MatchString(s.PasswordEnv):
		return "", fmt.Errorf("password_env %q is not an environment variable name", s.PasswordEnv)
	}
	if a, err := mail.ParseAddress(s.From); err != nil || a.Name != "" {
		return "", fmt.Errorf("from %q is not an email address", s.From)
	}
	return encode(s)
}

func canonicalWebhook(settings string) (string, error) {
	var s WebhookSettings
	if err := decodeStrict(settings, &s); err != nil {
		return "", err
	}
	if !envNameRE.MatchString(s.SecretEnv) {
		return "", fmt.Errorf("secret_env %q: name the environment variable that holds the signing secret", s.SecretEnv)
	}
	// Where the variable is set (an operator's shell on a central host, or
	// the central worker serving the outbox page), a bad secret is refused
	// now rather than parking every notification at delivery.
	if text := os.Getenv(s.SecretEnv); text != "" {
		if _, err := ParseWebhookSecret(text); err != nil {
			return "", fmt.Errorf("secret_env: $%s holds no valid secret: %w", s.SecretEnv, err)
		}
	}
	return encode(s)
}

// WebhookSecretNote says, of a webhook channel whose variable holds a plain
// secret where this runs, that it still works and how to replace it; ""
// otherwise.
func WebhookSecretNote(c centralstore.Channel) string {
	var s WebhookSettings
	if c.Type != centralstore.ChannelWebhook || json.Unmarshal([]byte(c.Settings), &s) != nil {
		return ""
	}
	secret, err := ParseWebhookSecret(os.Getenv(s.SecretEnv))
	if err != nil || !secret.Plain || secret.Text == "" {
		return ""
	}
	return fmt.Sprintf("note: channel %s: $%s is a plain secret (no whsec_): POSTs are still signed, with X-Outpost-Signature too, which the next release removes; %s, set it on every central worker and give it to the receivers",
		c.Name, s.SecretEnv, makeSecretHint)
}

// decodeStrict reads one JSON object into v, refusing unknown fields; ""
// reads as {}.
func decodeStrict(data string, v any) error {
	if strings.TrimSpace(data) == "" {
		data = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("want a JSON object of the type's fields: %w", err)
	}
	if dec.More() {
		return errors.New("want one JSON object, found more after it")
	}
	return nil
}

func encode(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSpace(b.String()), nil
}

// ListDiff says what changes from old to changed, "" when nothing does.
func ListDiff(old, changed centralstore.List, existed bool) string {
	if !existed {
		return fmt.Sprintf("created: type %s, targets %s%s", changed.Type, strings.Join(changed.Targets, ", "), channelNote(changed.Channel))
	}
	var parts []string
	field := func(name, before, after string) {
		if before != after {
			parts = append(parts, fmt.Sprintf("%s %q → %q", name, before, after))
		}
	}
	field("type", old.Type, changed.Type)
	field("channel", old.Channel, changed.Channel)
	field("type_data", old.TypeData, changed.TypeData)
	field("description", old.Description, changed.Description)
	for _, t := range changed.Targets {
		if !slices.Contains(old.Targets, t) {
			parts = append(parts, "+"+t)
		}
	}
	for _, t := range old.Targets {
		if !slices.Contains(changed.Targets, t) {
			parts = append(parts, "-"+t)
		}
	}
	return strings.Join(parts, ", ")
}

func channelNote(channel string) string {
	if channel == "" {
		return ""
	}
	return ", channel " + channel
}

// ChannelDiff says what changes from old to changed, "" when nothing does.
func ChannelDiff(old, changed centralstore.Channel, existed bool) string {
	if !existed {
		return fmt.Sprintf("created: type %s, settings %s", changed.Type, changed.Settings)
	}
	var parts []string
	for _, f := range []struct{ name, before, after string }{
		{"type", old.Type, changed.Type}, {"settings", old.Settings, changed.Settings}, {"description", old.Description, changed.Description},
	} {
		if f.before != f.after {
			parts = append(parts, fmt.Sprintf("%s %s → %s", f.name, f.before, f.after))
		}
	}
	return strings.Join(parts, ", ")
}
