package mailer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/mailer"
	"github.com/outpost-dev/outpost/internal/smtpsink"
)

func newMailer(t *testing.T, sink *smtpsink.Sink) *mailer.Mailer {
	t.Helper()
	return mailer.New(mailer.Config{Host: "127.0.0.1", Port: sink.Port(), From: "outpost@example.com", TLS: mailer.TLSNone, Timeout: 5 * time.Second})
}

var email = mailer.Email{ID: "0b0f6a43-7a3c-4c55-9d0c-2f0e8a9c8f11", To: []string{"ops@example.com"}, Subject: "Pump 3 tripped — ünïcode", Body: "Pressure low"}

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
	var sendErr *mailer.SendError

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
	cfg := mailer.Config{Host: "127.0.0.1", Port: sink.Port(), From: "outpost@example.com", TLS: mailer.TLSNone,
		Timeout: 500 * time.Millisecond, FinalReplyTimeout: 10 * time.Second}

	require.NoError(t, mailer.New(cfg).Send(context.Background(), email), "accepted after Timeout")
	msgs := sink.Messages()
	require.Len(t, msgs, 1)
	require.Equal(t, email.Body, strings.TrimRight(msgs[0].Body, "\r\n"))

	cfg.FinalReplyTimeout = 700 * time.Millisecond
	err = mailer.New(cfg).Send(context.Background(), email)
	var sendErr *mailer.SendError
	require.ErrorAs(t, err, &sendErr)
	require.True(t, sendErr.Uncertain, "%v", err)
	require.False(t, sendErr.Permanent)
}
