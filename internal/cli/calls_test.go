package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// calls list pages through every call and write, terminal ones too, newest
// first, filters, and says how to get the next page; --json prints the
// page with its token.
func TestCallsList(t *testing.T) {
	t.Parallel()
	cfg := kpiConfig(t) // on plant-2: a Retrying write (20m old), a Parked call (1h), a Delivered call (3h)

	out, _, err := run(t, "calls", "list", "--config", cfg, "--limit", "2")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^CREATED\s+ID\s+STATUS\s+KIND\s+SITE\s+TARGET\s+RETRIES\s+LAST ERROR$`, lines[0])
	require.Regexp(t, `\sRetrying\s+DatabaseWrite\s+plant-2\s+erp\.createOrder\s`, lines[1], "the newest first")
	require.Regexp(t, `\sParked\s+ExternalCall\s+plant-2\s`, lines[2])
	require.Regexp(t, `^2 shown; more match: add --after \S+$`, lines[3])
	token := regexp.MustCompile(`--after (\S+)`).FindStringSubmatch(out)[1]
	out, _, err = run(t, "calls", "list", "--config", cfg, "--limit", "2", "--after", token)
	require.NoError(t, err)
	require.Contains(t, out, "Delivered", "the oldest, on the last page")
	require.Contains(t, out, "1 shown; that is all.")

	out, _, err = run(t, "calls", "list", "--config", cfg, "--status", "Delivered", "--kind", "ExternalCall",
		"--site", "plant-2", "--target", "erp.createOrder", "--json")
	require.NoError(t, err)
	var page centralstore.CallPage
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Calls, 1)
	require.Equal(t, contract.StatusDelivered, page.Calls[0].Status)
	require.NotNil(t, page.Calls[0].TerminalAt)
	require.Empty(t, page.NextToken)

	out, _, err = run(t, "calls", "list", "--config", cfg, "--limit", "1", "--json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Calls, 1)
	require.NotEmpty(t, page.NextToken, "the next page's token in \"next\"")

	out, _, err = run(t, "calls", "list", "--config", cfg, "--site", "plant-1")
	require.NoError(t, err)
	require.Contains(t, out, "No call or write matches.", "plant-1 sent notifications only")
	out, _, err = run(t, "calls", "list", "--config", cfg, "--from", "2000-01-01", "--to", "2000-01-02")
	require.NoError(t, err)
	require.Contains(t, out, "No call or write matches.")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"calls", "list", "--config", cfg, "--status", "Lost"}, `status "Lost" is not one of`},
		{[]string{"calls", "list", "--config", cfg, "--kind", "Notification"}, `kind "Notification" is not one of ExternalCall, DatabaseWrite`},
		{[]string{"calls", "list", "--config", cfg, "--after", "yesterday"}, "--after"},
		{[]string{"calls", "list", "--config", cfg, "--to", "monday"}, `--to "monday"`},
		{[]string{"calls", "list", "--config", cfg, "plant-2"}, "calls list takes no arguments"},
	} {
		_, _, err := run(t, c.args...)
		require.ErrorIs(t, err, ErrUsage, "%v", c.args)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
}
