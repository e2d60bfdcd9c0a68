// Package mailer sends one notification email over SMTP with go-mail and
// says whether a failure is worth retrying.
package mailer

import (
	"context"
	"errors"
	"fmt"
	"net/textproto"
	"time"

	"github.com/wneessen/go-mail"
)

// TLS modes of Config.TLS.
const (
	TLSNone          = "none"          // plain SMTP (a local relay or the dev sink)
	TLSOpportunistic = "opportunistic" // STARTTLS when offered
	TLSStartTLS      = "starttls"      // STARTTLS required
	TLSImplicit      = "tls"           // TLS from the first byte (port 465)
)

// Config is how to reach the SMTP server.
type Config struct {
	Host     string
	Port     int
	Username string // empty: no authentication
	Password string
	From     string
	TLS      string
	Timeout  time.Duration
}

// Mailer sends notifications.
type Mailer struct {
	cfg Config
}

// New returns a Mailer for cfg.
func New(cfg Config) *Mailer { return &Mailer{cfg: cfg} }

// Email is one message to send.
type Email struct {
	// ID becomes the Message-ID and the X-Outpost-Notification-Id header, so
	// a duplicate is recognisable in any mailbox.
	ID      string
	To      []string
	Subject string
	Body    string
}

// HeaderNotificationID carries the notification id on every email.
const HeaderNotificationID = "X-Outpost-Notification-Id"

// Send delivers e. A *SendError says whether the failure is permanent.
func (m *Mailer) Send(ctx context.Context, e Email) error {
	msg := mail.NewMsg()
	if err := msg.From(m.cfg.From); err != nil {
		return &SendError{Permanent: true, Err: fmt.Errorf("from address %q: %w", m.cfg.From, err)}
	}
	if err := msg.To(e.To...); err != nil {
		return &SendError{Permanent: true, Err: fmt.Errorf("recipients: %w", err)}
	}
	msg.Subject(e.Subject)
	msg.SetMessageIDWithValue(e.ID + "@outpost")
	msg.SetGenHeader(HeaderNotificationID, e.ID)
	msg.SetBodyString(mail.TypeTextPlain, e.Body)

	client, err := mail.NewClient(m.cfg.Host, m.clientOptions()...)
	if err != nil {
		return &SendError{Permanent: true, Err: fmt.Errorf("smtp client: %w", err)}
	}
	if err := client.DialAndSendWithContext(ctx, msg); err != nil {
		return classify(err)
	}
	return nil
}

func (m *Mailer) clientOptions() []mail.Option {
	opts := []mail.Option{mail.WithPort(m.cfg.Port), mail.WithTimeout(m.cfg.Timeout)}
	switch m.cfg.TLS {
	case TLSNone:
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case TLSOpportunistic:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	case TLSImplicit:
		opts = append(opts, mail.WithSSL())
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	}
	if m.cfg.Username != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(m.cfg.Username), mail.WithPassword(m.cfg.Password))
	}
	return opts
}

// SendError is a failed send. Permanent failures (SMTP 5xx, bad addresses)
// will fail again; anything else (connection refused, timeouts, 4xx) may not.
type SendError struct {
	Permanent bool
	// Code is the SMTP reply code, 0 when the server never answered.
	Code int
	Err  error
}

func (e *SendError) Error() string {
	if e.Code != 0 {
		return fmt.Sprintf("smtp %d: %v", e.Code, e.Err)
	}
	return e.Err.Error()
}

func (e *SendError) Unwrap() error { return e.Err }

// classify turns go-mail's error into a SendError by the SMTP reply code.
func classify(err error) *SendError {
	code := 0
	var sendErr *mail.SendError
	var protoErr *textproto.Error
	switch {
	case errors.As(err, &sendErr):
		code = sendErr.ErrorCode()
	case errors.As(err, &protoErr):
		code = protoErr.Code
	}
	return &SendError{Permanent: code >= 500 && code < 600, Code: code, Err: err}
}
