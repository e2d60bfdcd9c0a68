package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
)

// kpiConfig writes a central SQLite store holding a few rows on two sites
// and a config naming it, and returns the config's path.
func kpiConfig(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "central.db")
	store, err := centralstore.OpenSQLite(ctx, dbPath)
	require.NoError(t, err)
	defer store.Close()
	now := time.Now().UTC()

	for _, n := range []struct {
		status  contract.Status
		created time.Duration // before now
	}{
		{contract.StatusPending, 150 * time.Minute},
		{contract.StatusRetrying, time.Minute},
		{contract.StatusParked, 3 * time.Hour},
		{contract.StatusDelivered, 20 * time.Minute},
	} {
		row := centralstore.Notification{
			NotificationID: uuid.NewString(), Type: contract.NotificationTypeEmail, ListName: "ops",
			Subject: "Pump 3 tripped", Body: "Pressure low", Status: contract.StatusPending, SourceSiteID: "plant-1",
			CreatedAt: now.Add(-n.created), SiteEnqueuedAt: now.Add(-n.created),
		}
		_, _, err := store.InsertNotification(ctx, row)
		require.NoError(t, err)
		switch n.status {
		case contract.StatusDelivered:
			require.NoError(t, store.MarkNotificationDelivered(ctx, row.NotificationID, now.Add(-10*time.Minute), []string{"ops@example.com"}))
		case contract.StatusPending:
		default:
			require.NoError(t, store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{NotificationID: row.NotificationID, Status: n.status}))
		}
	}

	call := func(kind string, status contract.Status, created time.Duration, terminal *time.Time, seq int64) contract.TrackedOperation {
		return contract.TrackedOperation{
			OperationID: uuid.NewString(), Kind: kind, Target: "erp.createOrder", Status: status, SourceSiteID: "plant-2",
			CreatedAt: now.Add(-created), UpdatedAt: now.Add(-created), TerminalAt: terminal, Seq: seq,
		}
	}
	deliveredAt := now.Add(-2 * time.Hour)
	_, err = store.UpsertSiteCalls(ctx, []contract.TrackedOperation{
		call(contract.KindExternalCall, contract.StatusParked, time.Hour, nil, 1),
		call(contract.KindDatabaseWrite, contract.StatusRetrying, 20*time.Minute, nil, 2),
		call(contract.KindExternalCall, contract.StatusDelivered, 3*time.Hour, &deliveredAt, 3),
	})
	require.NoError(t, err)

	cfg := filepath.Join(dir, "outpost.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("central:\n  stuck_age: 10m\n  store:\n    path: "+dbPath+"\n"), 0o644))
	return cfg
}

func TestKPITable(t *testing.T) {
	t.Parallel()
	cfg := kpiConfig(t)
	out, _, err := run(t, "kpi", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "(stuck: queued longer than 10m; delivered: last 1h)")

	var rows [][]string
	for _, line := range strings.Split(out, "\n")[2:] {
		if f := strings.Fields(line); len(f) > 0 {
			rows = append(rows, f)
		}
	}
	require.Equal(t, [][]string{
		{"site", "kind", "queue", "stuck", "parked", "delivered/1h", "oldest", "pending"},
		{"(global)", "Notification", "2", "1", "1", "1", "2h30m"},
		{"ExternalCall", "0", "0", "1", "0", "-"},
		{"DatabaseWrite", "1", "1", "0", "0", "20m"},
		{"all", "3", "2", "2", "1", "2h30m"},
		{"plant-1", "Notification", "2", "1", "1", "1", "2h30m"},
		{"ExternalCall", "0", "0", "0", "0", "-"},
		{"DatabaseWrite", "0", "0", "0", "0", "-"},
		{"all", "2", "1", "1", "1", "2h30m"},
		{"plant-2", "Notification", "0", "0", "0", "0", "-"},
		{"ExternalCall", "0", "0", "1", "0", "-"},
		{"DatabaseWrite", "1", "1", "0", "0", "20m"},
		{"all", "1", "1", "1", "0", "20m"},
	}, rows, out)
	// Columns line up: every number of a column starts at its header.
	lines := strings.Split(out, "\n")
	header := lines[2]
	require.Equal(t, strings.Index(header, "queue"), strings.Index(lines[4], "2 "), out)
}

func TestKPIJSON(t *testing.T) {
	t.Parallel()
	cfg := kpiConfig(t)
	out, _, err := run(t, "kpi", "--config", cfg, "--json", "--window", "3h")
	require.NoError(t, err)
	var report centralstore.KPIReport
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	require.Equal(t, 600.0, report.StuckAgeSeconds)
	require.Equal(t, 10800.0, report.WindowSeconds)
	require.Equal(t, 3, report.Global.Total.Queue)
	require.Equal(t, 2, report.Global.Total.Parked)
	require.Equal(t, 2, report.Global.Total.Delivered, "the call delivered 2h ago is inside a 3h window")
	require.Len(t, report.Sites, 2)
	require.Equal(t, "plant-1", report.Sites[0].Site)
	require.Equal(t, "plant-2", report.Sites[1].Site)
	require.Equal(t, 1, report.Sites[1].Kind(contract.KindExternalCall).Delivered)
	require.InDelta(t, 150*60, report.Global.Total.OldestPendingAgeSeconds, 60)

	// The raw JSON names its fields for scripts (jq '.global.total.parked').
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	require.EqualValues(t, 2, raw["global"].(map[string]any)["total"].(map[string]any)["parked"])
	kinds := raw["global"].(map[string]any)["kinds"].([]any)
	require.Equal(t, "Notification", kinds[0].(map[string]any)["kind"])
}

func TestKPIUsage(t *testing.T) {
	t.Parallel()
	_, stderr, err := run(t, "kpi", "--help")
	require.NoError(t, err)
	require.Contains(t, stderr, "Example:")
	require.Contains(t, stderr, "--window")
	_, _, err = run(t, "kpi", "--window", "0s")
	require.ErrorIs(t, err, ErrUsage)
	_, _, err = run(t, "kpi", "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "no such file")
}

// Without --config, kpi reads the store of the dev stack beside it (its
// config says where) and never
// creates one: in a directory with neither store it says what to do and
// leaves no file behind (it printed zeros from a new empty store before).
func TestKPIWithoutConfigFindsTheDevStackOrRefuses(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	_, _, err := run(t, "kpi")
	require.ErrorContains(t, err, "no central store at outpost-central.db: pass --config")
	_, statErr := os.Stat(filepath.Join(dir, "outpost-central.db"))
	require.ErrorIs(t, statErr, os.ErrNotExist, "no store created")

	devStore := config.DevDefault().Central.Store.Path
	require.NoError(t, os.MkdirAll(filepath.Dir(devStore), 0o755))
	_, _, err = run(t, "kpi")
	require.ErrorContains(t, err, "no central store at outpost-central.db", "a dev folder without the stack's config is not a stack")
	_, err = writeDevConfig(config.DevDefault())
	require.NoError(t, err)
	store, err := centralstore.OpenSQLite(context.Background(), devStore)
	require.NoError(t, err)
	row := centralstore.Notification{
		NotificationID: uuid.NewString(), Type: contract.NotificationTypeEmail, ListName: "ops", Subject: "s",
		Status: contract.StatusPending, SourceSiteID: "plant-1", CreatedAt: time.Now().UTC(), SiteEnqueuedAt: time.Now().UTC(),
	}
	_, _, err = store.InsertNotification(context.Background(), row)
	require.NoError(t, err)
	require.NoError(t, store.UpdateNotificationStatus(context.Background(), contract.NotificationUpdate{NotificationID: row.NotificationID, Status: contract.StatusParked}))
	require.NoError(t, store.Close())

	out, _, err := run(t, "kpi", "--json")
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	require.EqualValues(t, 1, raw["global"].(map[string]any)["total"].(map[string]any)["parked"])

	_, _, err = run(t, "kpi", "--config", writeFile(t, "central:\n  store: {path: "+filepath.Join(dir, "nope.db")+"}\n"))
	require.ErrorContains(t, err, "no central store at "+filepath.Join(dir, "nope.db")+": check central.store.path")
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outpost.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// A region's KPIs are in its own central's store: --region reads the store
// of a config whose central serves that region, says so above the table,
// and refuses another region's config rather than report its numbers.
func TestKPIRegion(t *testing.T) {
	t.Parallel()
	path := kpiConfig(t)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, append(raw, []byte("  region: eu\n")...), 0o644))

	stdout, _, err := run(t, "kpi", "--config", path, "--region", "eu")
	require.NoError(t, err)
	require.Contains(t, stdout, "Region eu: outbox at ")
	require.Contains(t, stdout, "plant-1")

	_, _, err = run(t, "kpi", "--config", path, "--region", "us")
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorContains(t, err, `--region us: this config's central serves region "eu"`)
	_, _, err = run(t, "kpi", "--config", path, "--region", "EU")
	require.ErrorContains(t, err, `region "EU": want 1-63 lower-case letters`)
}
