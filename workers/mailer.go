package workers

import (
	"fmt"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/mailer"
)

// smtpTLSModes translates central.smtp.tls into the mailer's modes.
var smtpTLSModes = map[string]string{
	config.SMTPTLSNone:          mailer.TLSNone,
	config.SMTPTLSOpportunistic: mailer.TLSOpportunistic,
	config.SMTPTLSStartTLS:      mailer.TLSStartTLS,
	config.SMTPTLSImplicit:      mailer.TLSImplicit,
}

// MailerConfig is the mailer of central.smtp, its password read from the
// variable central.smtp.password_env names.
func MailerConfig(c config.Central) (mailer.Config, error) {
	tls, ok := smtpTLSModes[c.SMTP.TLS]
	if !ok {
		return mailer.Config{}, fmt.Errorf("central.smtp.tls %q: want none, opportunistic, starttls or tls", c.SMTP.TLS)
	}
	return mailer.Config{
		Host: c.SMTP.Host, Port: c.SMTP.Port, Username: c.SMTP.Username, Password: c.SMTPPassword(),
		From: c.SMTP.From, TLS: tls, Timeout: c.SMTP.Timeout, FinalReplyTimeout: c.SMTP.FinalReplyTimeout,
	}, nil
}
