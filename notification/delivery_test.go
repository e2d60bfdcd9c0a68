package notification_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/notification"
)

// message is a notification to list "shift" with targets and the list's
// type data listData.
func message(targets []string, listData string) notification.Message {
	return notification.Message{
		ID: "0b6f2a1e-4f4e-4f7a-9d55-1c2b3a4d5e6f", List: "shift", ListData: listData, Subject: "Pump 3 tripped",
		Body: "Discharge pressure low", SourceSite: "plant-3", SourceScript: "pumps.py",
		SiteEnqueuedAt: time.Date(2026, 11, 17, 6, 0, 0, 0, time.UTC), Targets: targets,
	}
}

// receiver is a real HTTP server that records every POST and answers with
// the next of its answers (the last one repeats).
type receiver struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	answers []func(w http.ResponseWriter)
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, body)
	r.headers = append(r.headers, req.Header.Clone())
	answer := r.answers[min(len(r.bodies), len(r.answers))-1]
	answer(w)
}

func status(code int, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

func serve(t *testing.T, answers ...func(w http.ResponseWriter)) (*receiver, string) {
	r := &receiver{answers: answers}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL + "/hook?sig=secret"
}

// A Teams list posts a message with one Adaptive Card holding every field
// Teams requires, the subject, body, site and a link to the item.
func TestTeamsPostsAnAdaptiveCard(t *testing.T) {
	r, url := serve(t, status(http.StatusAccepted))
	d := message([]string{url}, `{"style":"warning"}`)
	d.Link = "http://ui/namespaces/default/workflows/x"
	require.NoError(t, notification.NewTeams(nil, nil).Deliver(context.Background(), d))
	require.Len(t, r.bodies, 1)
	require.Equal(t, "application/json", r.headers[0].Get("Content-Type"))
	require.Equal(t, d.ID, r.headers[0].Get(notification.HeaderNotificationID))
	requireAdaptiveCardMessage(t, r.bodies[0])
	text := string(r.bodies[0])
	for _, want := range []string{"Pump 3 tripped", "Discharge pressure low", "plant-3", `"warning"`, "http://ui/namespaces/default/workflows/x"} {
		require.Contains(t, text, want)
	}
}

// requireAdaptiveCardMessage checks what Teams refuses a message without:
// type message, one attachment of the Adaptive Card content type whose
// content is an AdaptiveCard with a version and typed body elements.
func requireAdaptiveCardMessage(t *testing.T, body []byte) {
	t.Helper()
	var msg struct {
		Type        string `json:"type"`
		Attachments []struct {
			ContentType string `json:"contentType"`
			Content     struct {
				Type    string `json:"type"`
				Version string `json:"version"`
				Body    []struct {
					Type string `json:"type"`
				} `json:"body"`
				Actions []struct {
					Type string `json:"type"`
					URL  string `json:"url"`
				} `json:"actions"`
			} `json:"content"`
		} `json:"attachments"`
	}
	require.NoError(t, json.Unmarshal(body, &msg))
	require.Equal(t, "message", msg.Type)
	require.Len(t, msg.Attachments, 1)
	a := msg.Attachments[0]
	require.Equal(t, "application/vnd.microsoft.card.adaptive", a.ContentType)
	require.Equal(t, "AdaptiveCard", a.Content.Type)
	require.NotEmpty(t, a.Content.Version)
	require.NotEmpty(t, a.Content.Body)
	for _, el := range a.Content.Body {
		require.NotEmpty(t, el.Type, "every card element has a type")
	}
	for _, act := range a.Content.Actions {
		require.Equal(t, "Action.OpenUrl", act.Type)
		require.NotEmpty(t, act.URL)
	}
}

// Answers are classified like cached calls': 429 and 5xx transient (with
// Retry-After read as seconds or a date, capped), other 4xx and redirects
// permanent; the URL's query (a Teams signature) never appears in an error.
func TestHTTPAnswersAreClassified(t *testing.T) {
	now := time.Date(2026, 11, 17, 6, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		answer     func(w http.ResponseWriter)
		permanent  bool
		retryAfter time.Duration
	}{
		{"429 seconds", status(429, "Retry-After", "5"), false, 5 * time.Second},
		{"503 date", status(503, "Retry-After", now.Add(90*time.Second).Format(http.TimeFormat)), false, 90 * time.Second},
		{"503 huge", status(503, "Retry-After", "999999"), false, notification.MaxRetryAfter},
		{"500", status(500), false, 0},
		{"408", status(408), false, 0},
		{"400", status(400), true, 0},
		{"404", status(404), true, 0},
		{"302", status(302, "Location", "https://elsewhere/?sig=x"), true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, url := serve(t, c.answer)
			d := message([]string{url}, "")
			err := notification.NewTeams(nil, func() time.Time { return now }).Deliver(context.Background(), d)
			var delErr *targets.Failure
			require.ErrorAs(t, err, &delErr)
			require.Equal(t, c.permanent, delErr.Permanent)
			require.Equal(t, c.retryAfter, delErr.RetryAfter)
			require.NotContains(t, err.Error(), "sig=")
		})
	}
}

// A receiver refusing the connection is transient.
func TestUnreachableReceiverIsTransient(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	d := message([]string{url}, "")
	err := notification.NewTeams(nil, nil).Deliver(context.Background(), d)
	var delErr *targets.Failure
	require.ErrorAs(t, err, &delErr)
	require.False(t, delErr.Permanent)
}

// Without its secret a webhook is not sent: the failure is permanent and
// says which variable to set.
func TestWebhookWithoutSecretIsNotSent(t *testing.T) {
	r, url := serve(t, status(http.StatusNoContent))
	d := message([]string{url}, "")
	d.Channel = &notification.Channel{Name: "hooks", Settings: `{"secret_env":"OUTPOST_TEST_UNSET_SECRET"}`}
	err := notification.NewWebhook(nil, nil, nil).Deliver(context.Background(), d)
	var delErr *targets.Failure
	require.ErrorAs(t, err, &delErr)
	require.True(t, delErr.Permanent)
	require.Contains(t, err.Error(), "$OUTPOST_TEST_UNSET_SECRET")
	require.Empty(t, r.bodies)
}

func TestResolveTargetsReadsTheEnvironment(t *testing.T) {
	t.Setenv("OPS_TEAMS_URL", "https://teams.example/hook?sig=x")
	got, err := notification.ResolveTargets([]string{"https://a.example/", "env:OPS_TEAMS_URL"})
	require.NoError(t, err)
	require.Equal(t, []string{"https://a.example/", "https://teams.example/hook?sig=x"}, got)
	_, err = notification.ResolveTargets([]string{"env:OUTPOST_TEST_UNSET_URL"})
	require.ErrorContains(t, err, "$OUTPOST_TEST_UNSET_URL is not set")
}

func TestCheckList(t *testing.T) {
	channels := map[string]centralstore.Channel{
		"relay": {Name: "relay", Type: centralstore.ChannelSMTP},
		"hooks": {Name: "hooks", Type: centralstore.ChannelWebhook},
	}
	list := func(typ string, targets []string, channel, data string) centralstore.List {
		return centralstore.List{Name: "shift", Type: typ, Targets: targets, Channel: channel, TypeData: data}
	}
	email, teams, hook := contract.NotificationTypeEmail, contract.NotificationTypeTeams, contract.NotificationTypeWebhook
	cases := []struct {
		name    string
		list    centralstore.List
		wantErr string
		data    string
	}{
		{"email", list(email, []string{"a@example.com"}, "", ""), "", "{}"},
		{"email via channel", list(email, []string{"a@example.com"}, "relay", "{}"), "", "{}"},
		{"no targets", list(email, nil, "", ""), "", "{}"},
		{"bad address", list(email, []string{"not an address"}, "", ""), "target 1", ""},
		{"named address", list(email, []string{"Ops <a@example.com>"}, "", ""), "not an email address", ""},
		{"email with fields", list(email, []string{"a@example.com"}, "", `{"style":"good"}`), "unknown field", ""},
		{"teams", list(teams, []string{"https://x.example/hook", "env:TEAMS_URL"}, "", `{"style":"good"}`), "", `{"style":"good"}`},
		{"teams bad style", list(teams, []string{"https://x.example/hook"}, "", `{"style":"red"}`), "style \"red\"", ""},
		{"teams not url", list(teams, []string{"ftp://x"}, "", ""), "not an http(s) URL", ""},
		{"teams channel", list(teams, []string{"https://x.example/"}, "hooks", ""), "takes no channel", ""},
		{"teams bad env", list(teams, []string{"env:1X"}, "", ""), "environment variable name", ""},
		{"webhook", list(hook, []string{"https://x.example/"}, "hooks", `{"headers":{"X-Plant":"3"}}`), "", `{"headers":{"X-Plant":"3"}}`},
		{"webhook no channel", list(hook, []string{"https://x.example/"}, "", ""), "webhook channel", ""},
		{"webhook smtp channel", list(hook, []string{"https://x.example/"}, "relay", ""), "is a smtp channel", ""},
		{"webhook missing channel", list(hook, []string{"https://x.example/"}, "gone", ""), "does not exist", ""},
		{"webhook own signature", list(hook, []string{"https://x.example/"}, "hooks", `{"headers":{"X-Outpost-Signature":"x"}}`), "set by Outpost", ""},
		{"webhook standard signature", list(hook, []string{"https://x.example/"}, "hooks", `{"headers":{"Webhook-Signature":"x"}}`), "set by Outpost", ""},
		{"webhook legacy signature", list(hook, []string{"https://x.example/"}, "hooks", `{"legacy_signature":true}`), "", `{"legacy_signature":true}`},
		{"webhook bad header", list(hook, []string{"https://x.example/"}, "hooks", `{"headers":{"a b":"x"}}`), "not a header name", ""},
		{"not json", list(teams, []string{"https://x.example/"}, "", `style=good`), "JSON object", ""},
		{"unknown type", list("Pager", []string{"x"}, "", ""), `type "Pager"`, ""},
		{"bad name", centralstore.List{Name: "a b", Type: email}, "list name", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := notification.CheckList(c.list, channels)
			if c.wantErr != "" {
				require.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.data, got.TypeData)
		})
	}
}

func TestCheckChannel(t *testing.T) {
	ok := func(typ, settings string) centralstore.Channel {
		return centralstore.Channel{Name: "c", Type: typ, Settings: settings}
	}
	got, err := notification.CheckChannel(ok(centralstore.ChannelSMTP, `{"host":"relay","port":587,"from":"outpost@plant.example","password_env":"RELAY_PW"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"host":"relay","port":587,"from":"outpost@plant.example","password_env":"RELAY_PW","tls":"starttls"}`, got.Settings)
	_, err = notification.CheckChannel(ok(centralstore.ChannelWebhook, `{"secret_env":"HOOK_SECRET"}`))
	require.NoError(t, err)
	for settings, want := range map[string]string{
		`{"port":25,"from":"a@b.c"}`:                         "host is required",
		`{"host":"h","port":0,"from":"a@b.c"}`:               "port 0",
		`{"host":"h","port":25,"from":"nobody"}`:             "from",
		`{"host":"h","port":25,"from":"a@b.c","tls":"ssl"}`:  "tls \"ssl\"",
		`{"host":"h","port":25,"from":"a@b.c","password":1}`: "unknown field",
	} {
		_, err := notification.CheckChannel(ok(centralstore.ChannelSMTP, settings))
		require.ErrorContains(t, err, want, settings)
	}
	_, err = notification.CheckChannel(ok(centralstore.ChannelWebhook, `{"secret":"inline"}`))
	require.ErrorContains(t, err, "unknown field")
	_, err = notification.CheckChannel(ok("pager", `{}`))
	require.ErrorContains(t, err, `type "pager"`)
}

// An adapter for a type the worker does not know fails permanently.
func TestUnknownTypeIsPermanent(t *testing.T) {
	_, err := notification.Adapters{}.For("Pager", "x")
	var delErr *targets.Failure
	require.True(t, errors.As(err, &delErr) && delErr.Permanent)
}
