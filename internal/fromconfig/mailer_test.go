package fromconfig

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/config"
)

// Every central.smtp.tls value config check accepts has a mailer mode.
func TestEverySMTPTLSModeTranslates(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{config.SMTPTLSNone, config.SMTPTLSOpportunistic, config.SMTPTLSStartTLS, config.SMTPTLSImplicit} {
		c := config.Default().Central
		c.SMTP.TLS = mode
		_, err := Mailer(c.SMTP)
		require.NoError(t, err, mode)
		_, err = config.Parse(strings.NewReader("central:\n  smtp:\n    tls: "+mode+"\n"), config.Default())
		require.NoError(t, err, mode)
	}
	c := config.Default().Central
	c.SMTP.TLS = "ssl"
	_, err := Mailer(c.SMTP)
	require.ErrorContains(t, err, `central.smtp.tls "ssl"`)
}
