package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/notification"
)

// A list changed while its notification is Retrying (SMTP down) takes
// effect on the next attempt, with no restart: the email goes to the new
// recipients, and the audit log names who changed the list.
func TestListChangeReachesARetryingNotification(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Central.SMTP.MaxRetries = 100 })
	s.stopSMTP()
	id := s.notify("ops", "Pump 3 tripped")
	s.waitStatus(contract.StatusRetrying, 30*time.Second, id)

	out, err := s.outpost("", "lists", "set", "--operator", "ana", "--target", "nightshift@example.com", "ops")
	require.NoError(t, err)
	require.Contains(t, out, "+nightshift@example.com")
	s.startSMTP()
	s.waitStatus(contract.StatusDelivered, 30*time.Second, id)

	msgs := s.sinks[len(s.sinks)-1].Messages()
	require.Len(t, msgs, 1)
	require.Equal(t, []string{"nightshift@example.com"}, msgs[0].To)
	store := s.centralStore()
	row, err := store.GetNotification(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, []string{"nightshift@example.com"}, row.ResolvedTargets)
	changes, err := store.ListAuditEvents(context.Background(), centralstore.ListOperationID("ops"))
	require.NoError(t, err)
	last := changes[len(changes)-1]
	require.Equal(t, "ana", last.Operator)
	require.Contains(t, last.Detail, "+nightshift@example.com")
}

// hookServer is a real HTTP receiver answering with its answers in turn
// (the last repeats) and recording when each POST came.
type hookServer struct {
	mu      sync.Mutex
	answers []int
	header  http.Header // sent with every answer
	posts   []hookPost
}

type hookPost struct {
	at     time.Time
	body   []byte
	header http.Header
}

func (h *hookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.posts = append(h.posts, hookPost{at: time.Now(), body: body, header: r.Header.Clone()})
	code := h.answers[min(len(h.posts), len(h.answers))-1]
	h.mu.Unlock()
	for k, v := range h.header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
}

func (h *hookServer) received() []hookPost {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.posts)
}

func startHook(t *testing.T, header http.Header, answers ...int) (*hookServer, string) {
	h := &hookServer{answers: answers, header: header}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, srv.URL + "/hook"
}

// Teams and Webhook lists deliver through real HTTP receivers: a card that
// carries Teams' required fields; a 429 with Retry-After: 5 retried no
// sooner than 5 s although the retry interval is 1 s; a 400 parked at once;
// a webhook whose receiver verifies the signature with the Standard
// Webhooks library and the shared secret.
func TestTeamsAndWebhookLists(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	t.Setenv("OUTPOST_E2E_HOOK_SECRET", secret)
	s := newStack(t, func(c *config.Config) { c.Central.SMTP.MaxRetries = 10 })
	slow, slowURL := startHook(t, http.Header{"Retry-After": {"5"}}, http.StatusTooManyRequests, http.StatusAccepted)
	_, badURL := startHook(t, nil, http.StatusBadRequest)
	hook, hookURL := startHook(t, nil, http.StatusNoContent)
	t.Setenv("OUTPOST_E2E_TEAMS_URL", slowURL)
	for _, args := range [][]string{
		{"lists", "set", "--type", "Teams", "--target", "env:OUTPOST_E2E_TEAMS_URL", "--type-data", `{"style":"warning"}`, "teams"},
		{"lists", "set", "--type", "Teams", "--target", badURL, "teams-bad"},
		{"channels", "set", "--type", "webhook", "--settings", `{"secret_env":"OUTPOST_E2E_HOOK_SECRET"}`, "hooks"},
		{"lists", "set", "--type", "Webhook", "--target", hookURL, "--channel", "hooks", "hook"},
	} {
		_, err := s.outpost("", append(args, "--operator", "ana")...)
		require.NoError(t, err, "%v", args)
	}
	teams, bad, hooked := s.notify("teams", "Pump 3 tripped"), s.notify("teams-bad", "Pump 4 tripped"), s.notify("hook", "Pump 5 tripped")

	s.waitStatus(contract.StatusParked, 30*time.Second, bad)
	st, _ := s.status(bad)
	require.Equal(t, 0, st.RetryCount, "a 400 parks at once")
	require.Contains(t, st.LastError, "400 Bad Request")

	s.waitStatus(contract.StatusDelivered, 30*time.Second, teams, hooked)
	posts := slow.received()
	require.Len(t, posts, 2)
	require.GreaterOrEqual(t, posts[1].at.Sub(posts[0].at), 5*time.Second, "Retry-After: 5 is waited")
	// The card's fields are checked in internal/delivery; here, that it is one.
	require.Contains(t, string(posts[1].body), `"contentType":"application/vnd.microsoft.card.adaptive"`)
	require.Contains(t, string(posts[1].body), "Pump 3 tripped")
	require.Equal(t, teams, posts[1].header.Get(notification.HeaderNotificationID))

	got := hook.received()
	require.Len(t, got, 1)
	verifier, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, verifier.Verify(got[0].body, got[0].header))
	require.Equal(t, hooked, got[0].header.Get(standardwebhooks.HeaderWebhookID))
	tampered := append(slices.Clone(got[0].body[:len(got[0].body)-1]), ' ', '}')
	require.ErrorIs(t, verifier.Verify(tampered, got[0].header), standardwebhooks.ErrNoMatchingSignature)
	var payload notification.WebhookPayload
	require.NoError(t, json.Unmarshal(got[0].body, &payload))
	require.Equal(t, hooked, payload.NotificationID)
	require.Equal(t, "plant-1", payload.SourceSite)

	row, err := s.centralStore().GetNotification(context.Background(), teams)
	require.NoError(t, err)
	require.Equal(t, contract.NotificationTypeTeams, row.Type)
	require.JSONEq(t, `{"style":"warning"}`, row.TypeData)
	require.Equal(t, []string{"env:OUTPOST_E2E_TEAMS_URL"}, row.ResolvedTargets, "the variable's name is recorded, not its value")
}
