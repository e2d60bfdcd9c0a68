package cli

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
)

// notifications list pages through every status, filters, and says how to
// get the next page; show prints one with its body and audit trail.
func TestNotificationsListAndShow(t *testing.T) {
	cfg := kpiConfig(t) // four notifications on plant-1: Pending, Retrying, Parked, Delivered

	out, _, err := run(t, "notifications", "list", "--config", cfg, "--limit", "3")
	require.NoError(t, err)
	require.Contains(t, out, "CREATED")
	require.Regexp(t, `3 shown; more match: add --after \S+`, out)
	token := regexp.MustCompile(`--after (\S+)`).FindStringSubmatch(out)[1]
	out, _, err = run(t, "notifications", "list", "--config", cfg, "--limit", "3", "--after", token)
	require.NoError(t, err)
	require.Contains(t, out, "1 shown; that is all.")
	require.Contains(t, out, "Parked", "the oldest, on the last page")

	out, _, err = run(t, "notifications", "list", "--config", cfg, "--status", "Delivered", "--json")
	require.NoError(t, err)
	var page centralstore.NotificationPage
	require.NoError(t, json.Unmarshal([]byte(out), &page))
	require.Len(t, page.Notifications, 1)
	delivered := page.Notifications[0]
	require.Equal(t, contract.StatusDelivered, delivered.Status)
	require.Equal(t, []string{"ops@example.com"}, delivered.ResolvedTargets)

	out, _, err = run(t, "notifications", "show", "--config", cfg, "notification/"+delivered.NotificationID)
	require.NoError(t, err)
	require.Contains(t, out, "Delivered (retries 0)")
	require.Contains(t, out, "Pressure low", "the body")
	require.Contains(t, out, "ops@example.com")
	require.Contains(t, out, "Audit trail:")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"notifications", "list", "--config", cfg, "--status", "Lost"}, `status "Lost" is not one of`},
		{[]string{"notifications", "list", "--config", cfg, "--after", "yesterday"}, "--after"},
		{[]string{"notifications", "list", "--config", cfg, "--from", "monday"}, `--from "monday"`},
		{[]string{"notifications", "show", "--config", cfg, "{not-a-uuid}"}, "is not a notification id"},
	} {
		_, _, err := run(t, c.args...)
		require.ErrorIs(t, err, ErrUsage, "%v", c.args)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
	_, _, err = run(t, "notifications", "show", "--config", cfg, "343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11")
	require.ErrorIs(t, err, centralstore.ErrNotFound)

	// No --config and no store here: it refuses rather than create one.
	t.Chdir(t.TempDir())
	_, _, err = run(t, "notifications", "list")
	require.ErrorContains(t, err, "no central store at "+filepath.Clean(config.Default().Central.Store.Path))
}
