package targets_test

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/notification"
)

// verdict is what a failure says of its attempt, and its text (the row's
// last_error).
type verdict struct {
	Permanent, Uncertain, Misconfigured bool
	Code                                int
	RetryAfter                          time.Duration
	Text                                string
}

func verdictOf(t *testing.T, err error) verdict {
	t.Helper()
	var f *targets.Failure
	require.ErrorAs(t, err, &f, "every protocol's failure is a *targets.Failure")
	return verdict{Permanent: f.Permanent, Uncertain: f.Uncertain, Misconfigured: f.Misconfigured,
		Code: f.Code, RetryAfter: f.RetryAfter, Text: f.Error()}
}

// Each protocol's failure, made by real parts (an SMTP server, HTTP
// receivers, a SQLite file), is read through the one failure type with the
// verdict its classifier gives and the text it always had.
func TestEveryProtocolsFailureIsATargetsFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		attempt func(t *testing.T) (err error, want verdict)
	}{
		{"SMTP 550", func(t *testing.T) (error, verdict) {
			return smtpRejected(t, 550, "mailbox unavailable"), verdict{Permanent: true, Code: 550,
				Text: `smtp 550: sending SMTP RCPT TO command: 550 "5.0.0 mailbox unavailable", affected recipient(s): <ops@example.com>, ` +
					"affected message ID: <" + email.ID + "@outpost>"}
		}},
		{"SMTP 451", func(t *testing.T) (error, verdict) {
			return smtpRejected(t, 451, "try again later"), verdict{Code: 451,
				Text: `smtp 451: sending SMTP RCPT TO command: 451 "4.0.0 try again later", affected recipient(s): <ops@example.com>, ` +
					"affected message ID: <" + email.ID + "@outpost>"}
		}},
		{"HTTP 400 to a cached call", func(t *testing.T) (error, verdict) {
			return cachedCall(t, http.StatusBadRequest, `{"error":"no such order"}`), verdict{Permanent: true, Code: 400,
				Text: `HTTP 400 Bad Request: {"error":"no such order"}`}
		}},
		{"HTTP 503 with Retry-After to Teams", teamsUnavailable},
		{"SQLite constraint", func(t *testing.T) (error, verdict) {
			return sqliteDuplicate(t), verdict{Permanent: true,
				Text: "exec: constraint failed: UNIQUE constraint failed: readings.tag (2067)"}
		}},
		{"webhook secret unset", func(t *testing.T) (error, verdict) {
			return webhookWithoutSecret(t), verdict{Permanent: true, Misconfigured: true,
				Text: `channel "hooks": $OUTPOST_TEST_UNSET_SECRET (its secret_env) is not set on this central worker`}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err, want := tc.attempt(t)
			require.Equal(t, want, verdictOf(t, err))
		})
	}
}

var email = notification.Email{ID: "5f1c7f0e-2d7b-4a8e-9a57-0c7b1f2e3d4a", To: []string{"ops@example.com"}, Subject: "Pump 3 tripped", Body: "Pressure low"}

func startSink(t *testing.T) *smtpsink.Sink {
	t.Helper()
	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	return sink
}

func mailerConfig(sink *smtpsink.Sink) notification.MailerConfig {
	return notification.MailerConfig{Host: "127.0.0.1", Port: sink.Port(), From: "outpost@example.com",
		TLS: notification.TLSNone, Timeout: 5 * time.Second}
}

// smtpRejected sends to a server that refuses every recipient with code.
func smtpRejected(t *testing.T, code int, text string) error {
	sink := startSink(t)
	sink.Reject(code, text)
	return notification.NewMailer(mailerConfig(sink)).Send(context.Background(), email)
}

// cachedCall makes a cached call to a system that answers code and body.
func cachedCall(t *testing.T, code int, body string) error {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	exec := targetexec.New(targets.New(map[string]targets.ExternalSystem{"erp": {
		BaseURL: srv.URL, Methods: map[string]targets.Method{"order": {Verb: http.MethodPost, Path: "orders"}},
	}}, nil))
	t.Cleanup(func() { require.NoError(t, exec.Close()) })
	_, err := exec.Execute(context.Background(), targets.Request{Kind: contract.KindExternalCall, System: "erp", Method: "order"})
	return err
}

// teamsUnavailable posts a Teams card to a receiver that answers 503 and
// asks for two minutes.
func teamsUnavailable(t *testing.T) (error, verdict) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("busy"))
	}))
	t.Cleanup(srv.Close)
	msg := notification.Message{ID: email.ID, List: "shift", Subject: "Pump 3 tripped", Targets: []string{srv.URL + "/hook?sig=secret"}}
	err := notification.NewTeams(nil, nil).Deliver(context.Background(), msg)
	return err, verdict{Code: 503, RetryAfter: 2 * time.Minute,
		Text: "POST " + srv.URL + "/hook: 503 Service Unavailable: busy"}
}

// sqliteDuplicate writes a row whose unique tag is already there.
func sqliteDuplicate(t *testing.T) error {
	path := filepath.Join(t.TempDir(), "historian.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	_, err = db.Exec(`CREATE TABLE readings (tag TEXT NOT NULL UNIQUE); INSERT INTO readings VALUES ('pump-3')`)
	require.NoError(t, err)
	exec := targetexec.New(targets.New(nil, map[string]targets.Database{"historian": {Driver: targets.DriverSQLite, DSN: path}}))
	t.Cleanup(func() { require.NoError(t, exec.Close()) })
	_, err = exec.Execute(context.Background(), targets.Request{Kind: contract.KindDatabaseWrite, Connection: "historian",
		SQL: `INSERT INTO readings (tag) VALUES (?)`, Args: []any{"pump-3"}})
	return err
}

// webhookWithoutSecret delivers to a webhook list whose channel's secret
// variable is unset on this worker.
func webhookWithoutSecret(t *testing.T) error {
	msg := notification.Message{ID: email.ID, List: "hooks", Subject: "Pump 3 tripped", Targets: []string{"http://127.0.0.1:1/hook"},
		Channel: &notification.Channel{Name: "hooks", Settings: `{"secret_env":"OUTPOST_TEST_UNSET_SECRET"}`}}
	return notification.NewWebhook(nil, nil, nil).Deliver(context.Background(), msg)
}
