package mailer_test

import (
	"context"
	"errors"
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
