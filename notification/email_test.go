package notification_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/notification"
)

func newMailer(t *testing.T, sink *smtpsink.Sink) *notification.Mailer {
	t.Helper()
	return notification.NewMailer(notification.MailerConfig{Host: "127.0.0.1", Port: sink.Port(), From: "outpost@example.com", TLS: notification.TLSNone, Timeout: 5 * time.Second})
}

var email = notification.Email{ID: "0b0f6a43-7a3c-4c55-9d0c-2f0e8a9c8f11", To: []string{"ops@example.com"}, Subject: "Pump 3 tripped — ünïcode", Body: "Pressure low"}

func TestSendDeliversWithNotificationID(t *testing.T) {
	t.Parallel()
	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	require.NoError(t, newMailer(t, sink).Send(context.Background(), email))
	msgs := sink.Messages()
	require.Len(t, msgs, 1)
	require.Equal(t, email.ID, msgs[0].NotificationID)
	require.Equal(t, email.Subject, msgs[0].Subject)
	require.Equal(t, []string{"ops@example.com"}, msgs[0].To)
}

// SMTP 5xx is permanent; 4xx and an unreachable server are worth retrying.
func TestSendClassifiesFailures(t *testing.T) {
	t.Parallel()
	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	m := newMailer(t, sink)
	var sendErr *targets.Failure

	sink.Reject(550, "mailbox unavailable")
	err = m.Send(context.Background(), email)
	require.True(t, errors.As(err, &sendErr))
	require.True(t, sendErr.Permanent)
	require.Equal(t, 550, sendErr.Code)

	sink.Reject(451, "try again later")
	err = m.Send(context.Background(), email)
	require.True(t, errors.As(err, &sendErr))
	require.False(t, sendErr.Permanent)
	require.Equal(t, 451, sendErr.Code)

	require.NoError(t, sink.Close())
	err = m.Send(context.Background(), email)
	require.True(t, errors.As(err, &sendErr))
	require.False(t, sendErr.Permanent)
	require.ErrorContains(t, err, "connection refused")
}

// A relay that takes the whole message and answers 250 after Timeout is a
// delivery, not a failure to retry: the final reply has its own deadline.
// Past that deadline the outcome is Uncertain, never Permanent.
func TestSendWaitsForALateFinalReply(t *testing.T) {
	t.Parallel()
	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	// The sink calls OnEmail before it answers the end of the message.
	sink.OnEmail(func(smtpsink.Message) { time.Sleep(1500 * time.Millisecond) })
	cfg := notification.MailerConfig{Host: "127.0.0.1", Port: sink.Port(), From: "outpost@example.com", TLS: notification.TLSNone,
		Timeout: 500 * time.Millisecond, FinalReplyTimeout: 10 * time.Second}

	require.NoError(t, notification.NewMailer(cfg).Send(context.Background(), email), "accepted after Timeout")
	msgs := sink.Messages()
	require.Len(t, msgs, 1)
	require.Equal(t, email.Body, strings.TrimRight(msgs[0].Body, "\r\n"))

	cfg.FinalReplyTimeout = 700 * time.Millisecond
	err = notification.NewMailer(cfg).Send(context.Background(), email)
	var sendErr *targets.Failure
	require.ErrorAs(t, err, &sendErr)
	require.True(t, sendErr.Uncertain, "%v", err)
	require.False(t, sendErr.Permanent)
}

// An Email list's smtp channel sends through its own server, with its
// sender address and its password variable; a list without one uses the
// Mailer's own server.
func TestDeliverUsesTheListsChannel(t *testing.T) {
	central, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { central.Close() })
	relay, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { relay.Close() })
	relay.RequireAuth("outpost", "relay-pass")
	t.Setenv("OUTPOST_TEST_RELAY_PASSWORD", "relay-pass")

	d := notification.Message{ID: "6f1c2d3e-0000-4000-8000-000000000001", Subject: "Pump 3 tripped", Body: "b", Targets: []string{"ops@example.com"}}
	m := newMailer(t, central)
	require.NoError(t, m.Deliver(context.Background(), d))
	require.Len(t, central.Messages(), 1)

	d.Channel = &notification.Channel{Name: "relay", Settings: fmt.Sprintf(
		`{"host":"127.0.0.1","port":%d,"username":"outpost","password_env":"OUTPOST_TEST_RELAY_PASSWORD","from":"plant@example.com","tls":"none"}`, relay.Port())}
	require.NoError(t, m.Deliver(context.Background(), d))
	require.Len(t, central.Messages(), 1, "not through central.smtp")
	got := relay.Messages()
	require.Len(t, got, 1)
	require.Equal(t, "plant@example.com", got[0].From)
	require.Equal(t, []string{"ops@example.com"}, got[0].To)
}

// A send whose context ends (the attempt was timed out by Temporal, its
// worker's heartbeat refused) stops at once, even while the server holds
// its final reply, instead of racing the attempt Temporal retries; the
// server records nothing.
func TestSendStopsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	held := sink.HoldNextData()
	cfg := notification.MailerConfig{Host: "127.0.0.1", Port: sink.Port(), From: "outpost@example.com", TLS: notification.TLSNone,
		Timeout: 5 * time.Second, FinalReplyTimeout: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- notification.NewMailer(cfg).Send(ctx, email) }()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the message never reached the end of DATA")
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(20 * time.Second):
		t.Fatal("Send still waits for the final reply 20 s after its context ended")
	}
	require.Empty(t, sink.Messages())
}

// Every email names the worker that sent it; the sink records each whole
// message it refused after DATA or accepted, with its notification and
// worker, as one attempt.
func TestSendNamesItsWorker(t *testing.T) {
	t.Parallel()
	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	defer sink.Close()
	m := notification.NewMailer(notification.MailerConfig{Host: "127.0.0.1", Port: sink.Port(), From: "outpost@example.com", TLS: notification.TLSNone,
		Timeout: 5 * time.Second}).WithWorker("4242@central-a@outpost-central")
	sink.RejectData(451, "try again later")
	var sendErr *targets.Failure
	require.ErrorAs(t, m.Send(context.Background(), email), &sendErr)
	require.False(t, sendErr.Permanent, "a 451 after DATA is transient")
	sink.RejectData(0, "")
	require.NoError(t, m.Send(context.Background(), email))

	msgs := sink.Messages()
	require.Len(t, msgs, 1, "the refused message is not kept")
	require.Equal(t, "4242@central-a@outpost-central", msgs[0].Worker)
	attempts := sink.Attempts()
	require.Len(t, attempts, 2)
	for i, a := range attempts {
		require.Equal(t, email.ID, a.NotificationID, "attempt %d", i)
		require.Equal(t, "4242@central-a@outpost-central", a.Worker, "attempt %d", i)
		require.False(t, a.End.Before(a.Start), "attempt %d ends after it starts", i)
		require.Equal(t, i == 1, a.Accepted, "attempt %d", i)
	}
	require.False(t, attempts[1].Start.Before(attempts[0].End), "the second attempt began after the first ended")
}
