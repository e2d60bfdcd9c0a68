package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/centralstore"
)

// The list commands create, change and remove lists in the central store,
// each change audited with who made it; a bad definition is a usage error
// that writes nothing.
func TestListsCommands(t *testing.T) {
	cfg := kpiConfig(t)
	out, _, err := run(t, "lists", "ls", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "No notification lists")

	out, _, err = run(t, "lists", "set", "--config", cfg, "--operator", "ana", "--target", "ops@plant.example", "ops")
	require.NoError(t, err)
	require.Contains(t, out, "List ops: created: type Email, targets ops@plant.example")
	out, _, err = run(t, "lists", "add-target", "--config", cfg, "--operator", "ben", "ops", "oncall@plant.example")
	require.NoError(t, err)
	require.Contains(t, out, "+oncall@plant.example")
	out, _, err = run(t, "lists", "remove-target", "--config", cfg, "--operator", "cai", "ops", "ops@plant.example")
	require.NoError(t, err)
	require.Contains(t, out, "-ops@plant.example")
	out, _, err = run(t, "lists", "set", "--config", cfg, "--operator", "cai", "--description", "", "ops")
	require.NoError(t, err)
	require.Contains(t, out, "List ops is unchanged.")

	out, _, err = run(t, "lists", "show", "--config", cfg, "--json", "ops")
	require.NoError(t, err)
	var shown struct {
		List    centralstore.List
		Changes []centralstore.AuditEvent
	}
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	require.Equal(t, []string{"oncall@plant.example"}, shown.List.Targets)
	require.Equal(t, "cai", shown.List.UpdatedBy)
	var who []string
	for _, e := range shown.Changes {
		who = append(who, e.Operator)
	}
	require.Equal(t, []string{"ana", "ben", "cai"}, who)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lists", "set", "--config", cfg, "--target", "not an address", "ops"}, "is not an email address"},
		{[]string{"lists", "set", "--config", cfg, "--type", "Webhook", "--target", "https://h.example/", "hook"}, "webhook channel"},
		{[]string{"lists", "set", "--config", cfg, "--type", "Teams", "--target", "https://h.example/", "--type-data", "{", "t"}, "JSON object"},
		{[]string{"lists", "show", "--config", cfg}, "takes 1 argument"},
	} {
		_, _, err := run(t, c.args...)
		require.ErrorIs(t, err, ErrUsage, "%v", c.args)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
	_, _, err = run(t, "lists", "remove-target", "--config", cfg, "ops", "nobody@plant.example")
	require.ErrorContains(t, err, `has no target "nobody@plant.example"`)

	out, _, err = run(t, "lists", "rm", "--config", cfg, "--operator", "ana", "ops")
	require.NoError(t, err)
	require.Contains(t, out, "Removed list ops.")
	_, _, err = run(t, "lists", "show", "--config", cfg, "ops")
	require.ErrorIs(t, err, centralstore.ErrNotFound)
}

// lists apply shows the changes, writes them, and changes nothing when the
// same file is applied again; a channel in use cannot be removed.
func TestListsApplyIsIdempotent(t *testing.T) {
	cfg := kpiConfig(t)
	file := filepath.Join(t.TempDir(), "lists.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`
channels:
  ops-hooks: {type: webhook, settings: {secret_env: OPS_HOOK_SECRET}}
lists:
  ops: {type: Email, targets: [ops@plant.example]}
  ops-teams: {type: Teams, targets: ["env:OPS_TEAMS_URL"], type_data: {style: warning}}
  ops-hook: {type: Webhook, targets: ["https://hooks.plant.example/outpost"], channel: ops-hooks}
`), 0o600))

	out, _, err := run(t, "lists", "apply", "--config", cfg, "--dry-run", file)
	require.NoError(t, err)
	require.Contains(t, out, "channel ops-hooks: created")
	require.Contains(t, out, "list ops-hook: created")
	require.Contains(t, out, "4 change(s); nothing written (--dry-run).")
	out, _, err = run(t, "lists", "ls", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "No notification lists", "a dry run writes nothing")

	out, _, err = run(t, "lists", "apply", "--config", cfg, "--operator", "ci", file)
	require.NoError(t, err)
	require.Contains(t, out, "4 change(s) written.")
	out, _, err = run(t, "lists", "apply", "--config", cfg, "--operator", "ci", file)
	require.NoError(t, err)
	require.Equal(t, 4, strings.Count(out, ": unchanged"), out)
	require.Contains(t, out, "0 change(s); nothing written.")

	out, _, err = run(t, "lists", "ls", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "ops-teams")
	require.Contains(t, out, "env:OPS_TEAMS_URL")
	out, _, err = run(t, "channels", "ls", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, `{"secret_env":"OPS_HOOK_SECRET"}`)
	_, _, err = run(t, "channels", "rm", "--config", cfg, "ops-hooks")
	require.ErrorContains(t, err, `used by list "ops-hook"`)

	require.NoError(t, os.WriteFile(file, []byte("lists:\n  ops: {type: Email, targets: [ops@plant.example]}\n"), 0o600))
	out, _, err = run(t, "lists", "apply", "--config", cfg, "--dry-run", file)
	require.NoError(t, err)
	require.Contains(t, out, "list ops-teams: not in the file, kept")
	require.Contains(t, out, "channel ops-hooks: not in the file, kept")

	require.NoError(t, os.WriteFile(file, []byte("lists:\n  ops: {type: Email, tragets: [a@b.example]}\n"), 0o600))
	_, _, err = run(t, "lists", "apply", "--config", cfg, file)
	require.ErrorContains(t, err, "field tragets not found")
}

// A webhook channel whose secret variable is set where the channel is
// written is checked: a whsec_ secret that is not valid is refused (by
// channels set and lists apply) saying how to make one, a plain secret is
// accepted with a note; unset here, it is the central workers' to read.
func TestWebhookChannelSecretIsCheckedWhereItIsSet(t *testing.T) {
	cfg := kpiConfig(t)
	file := filepath.Join(t.TempDir(), "lists.yaml")
	require.NoError(t, os.WriteFile(file, []byte("channels:\n  hooks: {type: webhook, settings: {secret_env: OPS_HOOK_SECRET}}\n"), 0o600))
	set := []string{"channels", "set", "--config", cfg, "--type", "webhook", "--settings", `{"secret_env":"OPS_HOOK_SECRET"}`, "hooks"}

	t.Setenv("OPS_HOOK_SECRET", "whsec_+cobxsohXilkRBLU6wBP6g==")
	for _, args := range [][]string{set, {"lists", "apply", "--config", cfg, "--dry-run", file}} {
		_, _, err := run(t, args...)
		require.ErrorIs(t, err, ErrUsage, "%v", args)
		require.ErrorContains(t, err, "$OPS_HOOK_SECRET", "%v", args)
		require.ErrorContains(t, err, "16 bytes", "%v", args)
		require.ErrorContains(t, err, `echo "whsec_$(openssl rand -base64 32)"`, "%v", args)
	}
	out, _, err := run(t, "channels", "ls", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "No delivery channels", "a refused channel is not written")

	t.Setenv("OPS_HOOK_SECRET", "plain-from-before")
	out, _, err = run(t, set...)
	require.NoError(t, err)
	require.Contains(t, out, "Channel hooks: created")
	require.Contains(t, out, "$OPS_HOOK_SECRET is a plain secret")
	require.NotContains(t, out, "plain-from-before", "the secret is never printed")
	out, _, err = run(t, "lists", "apply", "--config", cfg, "--dry-run", file)
	require.NoError(t, err)
	require.Contains(t, out, "$OPS_HOOK_SECRET is a plain secret")

	t.Setenv("OPS_HOOK_SECRET", "whsec_lc7GvMHJwUlZ+cvUN586pEc3kwgBCCA9JUNGTwyFFDg=")
	out, _, err = run(t, "lists", "apply", "--config", cfg, "--dry-run", file)
	require.NoError(t, err)
	require.NotContains(t, out, "plain secret")
	require.NoError(t, os.Unsetenv("OPS_HOOK_SECRET"))
	out, _, err = run(t, "lists", "apply", "--config", cfg, "--dry-run", file)
	require.NoError(t, err)
	require.Contains(t, out, "channel hooks: unchanged")
}
