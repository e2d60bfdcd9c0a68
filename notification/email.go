package notification

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/outpost-dev/outpost/internal/targets"
)

// TLS modes of MailerConfig.TLS.
const (
	TLSNone          = "none"          // plain SMTP (a local relay or the dev sink)
	TLSOpportunistic = "opportunistic" // STARTTLS when offered
	TLSStartTLS      = "starttls"      // STARTTLS required
	TLSImplicit      = "tls"           // TLS from the first byte (port 465)
)

// MailerConfig is how to reach the SMTP server.
type MailerConfig struct {
	Host     string
	Port     int
	Username string // empty: no authentication
	Password string
	From     string
	TLS      string
	// Timeout bounds connecting (with TLS and authentication) and then the
	// commands up to the end of the message, each.
	Timeout time.Duration
	// FinalReplyTimeout is how long the server may take to answer once it
	// has the whole message (RFC 5321 recommends 10 minutes): a relay that
	// accepts late must not be taken for one that refused, or the email is
	// sent again. Timeout when zero.
	FinalReplyTimeout time.Duration
}

// Mailer sends one notification email over SMTP with go-mail and says
// whether a failure is worth retrying: it is the delivery adapter of Email
// lists.
type Mailer struct {
	cfg MailerConfig
	// worker names the sending central worker (WithWorker); "" for none.
	worker string
}

// NewMailer returns a Mailer for cfg.
func NewMailer(cfg MailerConfig) *Mailer { return &Mailer{cfg: cfg} }

// WithWorker is m naming in HeaderWorker the central worker that sends
// (its Temporal worker identity): who sent each copy of an email is then
// in the mailbox. It is the running process's, not configuration.
func (m *Mailer) WithWorker(worker string) *Mailer {
	named := *m
	named.worker = worker
	return &named
}

// Email is one message to send.
type Email struct {
	// ID becomes the Message-ID and the X-Outpost-Notification-Id header, so
	// a duplicate is recognisable in any mailbox.
	ID      string
	To      []string
	Subject string
	Body    string
}

// HeaderWorker names the central worker that sent the email, as Temporal's
// history names it in the attempt's ActivityTaskStarted event: with two
// copies of one notification in a mailbox, it tells which worker sent each.
const HeaderWorker = "X-Outpost-Worker"

// Deliver sends msg to its targets, through the list's smtp channel when
// it names one, else through m's server.
func (m *Mailer) Deliver(ctx context.Context, msg Message) error {
	through := m
	if msg.Channel != nil {
		var err error
		if through, err = m.forChannel(*msg.Channel); err != nil {
			return err
		}
	}
	return through.Send(ctx, Email{ID: msg.ID, To: msg.Targets, Subject: msg.Subject, Body: msg.Body})
}

// forChannel is a Mailer for an smtp channel's server, with m's timeouts.
func (m *Mailer) forChannel(c Channel) (*Mailer, error) {
	var s SMTPSettings
	if err := json.Unmarshal([]byte(c.Settings), &s); err != nil {
		return nil, &targets.Failure{Permanent: true, Err: fmt.Errorf("channel %q: settings: %w", c.Name, err)}
	}
	cfg := m.cfg
	cfg.Host, cfg.Port, cfg.Username, cfg.From, cfg.TLS = s.Host, s.Port, s.Username, s.From, s.TLS
	cfg.Password = ""
	if s.PasswordEnv != "" {
		cfg.Password = os.Getenv(s.PasswordEnv)
	}
	return NewMailer(cfg), nil
}

// Send delivers e. A *targets.Failure says whether the failure is
// permanent, and whether the server may have accepted the message all the
// same (Uncertain).
func (m *Mailer) Send(ctx context.Context, e Email) error {
	client, err := mail.NewClient(m.cfg.Host, m.clientOptions()...)
	if err != nil {
		return &targets.Failure{Permanent: true, Err: fmt.Errorf("smtp client: %w", err)}
	}
	conn, err := client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return classifySMTP(err)
	}
	defer client.CloseWithSMTPClient(conn) //nolint:errcheck // the message's fate is already known
	// go-mail heeds ctx only while dialling. An attempt whose context ends
	// (Temporal timed it out: its heartbeat was refused) must stop rather
	// than race the attempt Temporal retries, so closing the connection
	// ends the conversation wherever it is: cut before the end of the
	// message, the server discards it.
	text := conn.Text
	stop := context.AfterFunc(ctx, func() { _ = text.Close() })
	defer stop()
	msg, err := m.message(e, func() error { return conn.UpdateDeadline(m.finalReplyTimeout()) })
	if err != nil {
		return err
	}
	if err := client.SendWithSMTPClient(conn, msg); err != nil {
		return classifySMTP(stopped(ctx, err))
	}
	return nil
}

// stopped says in err that the send was cut because ctx ended, when it
// did: the connection error alone would not tell why.
func stopped(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("send stopped as its attempt ended (%w): %w", cause, err)
	}
	return err
}

// message builds e's email. bodyWritten runs once the body is on the wire:
// only the end-of-data mark and the server's final reply are left, and the
// wait for that reply gets its own deadline.
func (m *Mailer) message(e Email, bodyWritten func() error) (*mail.Msg, error) {
	msg := mail.NewMsg()
	if err := msg.From(m.cfg.From); err != nil {
		return nil, &targets.Failure{Permanent: true, Err: fmt.Errorf("from address %q: %w", m.cfg.From, err)}
	}
	if err := msg.To(e.To...); err != nil {
		return nil, &targets.Failure{Permanent: true, Err: fmt.Errorf("recipients: %w", err)}
	}
	msg.Subject(e.Subject)
	// The same id on every attempt: a copy sent twice is recognisable, and
	// mail systems that deduplicate on Message-ID drop it.
	msg.SetMessageIDWithValue(e.ID + "@outpost")
	msg.SetGenHeader(HeaderNotificationID, e.ID)
	if m.worker != "" {
		msg.SetGenHeader(HeaderWorker, m.worker)
	}
	msg.SetBodyWriter(mail.TypeTextPlain, func(w io.Writer) (int64, error) {
		n, err := io.WriteString(w, e.Body)
		if err != nil {
			return int64(n), err
		}
		return int64(n), bodyWritten()
	})
	return msg, nil
}

func (m *Mailer) finalReplyTimeout() time.Duration {
	if m.cfg.FinalReplyTimeout > 0 {
		return m.cfg.FinalReplyTimeout
	}
	return m.cfg.Timeout
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

// classifySMTP turns go-mail's error into a failure by the SMTP reply code
// and the step that failed. Permanent failures (SMTP 5xx; bad addresses,
// which Send reports itself) will fail again; anything else (connection
// refused, timeouts, 4xx) may not. A failure with a reply code reads
// "smtp <code>: <go-mail's error>".
func classifySMTP(err error) *targets.Failure {
	code := 0
	var sendErr *mail.SendError
	var protoErr *textproto.Error
	switch {
	case errors.As(err, &sendErr):
		code = sendErr.ErrorCode()
	case errors.As(err, &protoErr):
		code = protoErr.Code
	}
	uncertain := code == 0 && sendErr != nil && sendErr.Reason == mail.ErrSMTPDataClose
	failure := &targets.Failure{Permanent: code >= 500 && code < 600, Uncertain: uncertain, Code: code, Err: err}
	if code != 0 {
		failure.Message = fmt.Sprintf("smtp %d: %v", code, err)
	}
	return failure
}
