package workers

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/airgap"
	"github.com/outpost-dev/outpost/internal/airgapsync"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
)

// temporalStub takes the SignalWithStartWorkflow an import makes for each
// new notification, and starts nothing: this test is about what central
// records and serves (internal/e2e/airgap_test.go imports into a real
// Temporal server).
type temporalStub struct{ client.Client }

func (temporalStub) SignalWithStartWorkflow(context.Context, string, string, any, client.StartWorkflowOptions, any, ...any) (client.WorkflowRun, error) {
	return nil, nil
}

// exportSite sends a notification under each idempotency key on a fresh
// site file of node (site ship-7), exports it as the CLI does and returns
// the bundle's path and size on disk.
func exportSite(t *testing.T, dir, node string, keys ...string) (string, int64) {
	t.Helper()
	ctx := context.Background()
	storePath := filepath.Join(dir, node+".db")
	c, err := site.Open(ctx, storePath, site.Options{SiteID: "ship-7", Node: node})
	require.NoError(t, err)
	for _, key := range keys {
		_, err := c.Send(ctx, site.Notification{List: "ops", Subject: key + " on " + node, IdempotencyKey: key})
		require.NoError(t, err)
	}
	require.NoError(t, c.Close())
	store, err := sitestore.Open(ctx, storePath, sitestore.Options{})
	require.NoError(t, err)
	defer store.Close()
	path := filepath.Join(dir, node+".json")
	_, err = airgapsync.Export(ctx, store, airgapsync.ExportOptions{Site: "ship-7", Node: node, Now: time.Now().UTC(), Path: path})
	require.NoError(t, err)
	info, err := os.Stat(path)
	require.NoError(t, err)
	return path, info.Size()
}

// serveCentral serves central's /metrics on store and returns its address.
func serveCentral(t *testing.T, store *centralstore.Store) string {
	t.Helper()
	h, err := startCentralHTTP(CentralOptions{Listen: "127.0.0.1:0", StuckAge: time.Hour}, store, temporalStub{},
		prometheus.NewRegistry(), NewDeliveryEvents(), zap.NewNop())
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- h.serve() }()
	t.Cleanup(func() {
		require.NoError(t, h.shutdown())
		require.NoError(t, <-served)
	})
	return h.listener.Addr().String()
}

// Central's /metrics counts the imports the CLI recorded: a bundle, the
// same bundle again (every entry a duplicate), two bundles that claim one
// job with two payloads (refused, counted as a conflict), then one of
// them alone.
func TestCentralMetricsCountAirgapImports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := centralstore.OpenSQLite(ctx, filepath.Join(dir, "central.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	addr := serveCentral(t, store)
	first, firstSize := exportSite(t, dir, "node-a", "tank-1", "tank-2", "tank-3")
	reusedB, reusedBSize := exportSite(t, dir, "node-b", "reused")
	reusedC, _ := exportSite(t, dir, "node-c", "reused")

	im := &airgapsync.Importer{Temporal: temporalStub{}, Store: store}
	importFiles := func(paths ...string) (airgapsync.ImportResult, error) {
		bundles, err := airgapsync.ReadBundles(paths)
		require.NoError(t, err)
		return im.Import(ctx, bundles, airgapsync.ImportOptions{
			Verify: airgap.VerifyOptions{AllowUnsigned: true}, By: "ana", Now: time.Now().UTC(),
		})
	}
	started := time.Now()
	res, err := importFiles(first)
	require.NoError(t, err)
	require.Equal(t, 3, res.Imported)
	res, err = importFiles(first)
	require.NoError(t, err)
	require.Equal(t, 3, res.Duplicates)
	res, err = importFiles(reusedB, reusedC)
	require.ErrorIs(t, err, airgapsync.ErrNotImported)
	require.Len(t, res.Conflicts, 1)
	res, err = importFiles(reusedB)
	require.NoError(t, err, "a bundle of a refused import stays importable")
	require.Equal(t, 1, res.Imported)
	took := time.Since(started).Seconds()

	m := testutil.ScrapeMetrics(t, "http://"+addr+"/metrics")
	require.Equal(t, 2.0, testutil.MetricValue(m, "airgap_bundles_imported_total", nil))
	require.Equal(t, 4.0, testutil.MetricValue(m, "airgap_jobs_synced_total", nil))
	require.Equal(t, 3.0, testutil.MetricValue(m, "airgap_duplicates_dropped_total", nil))
	require.Equal(t, 1.0, testutil.MetricValue(m, "airgap_merge_conflicts_total", map[string]string{"type": "payload_mismatch"}))
	require.Equal(t, 0.0, testutil.MetricValue(m, "airgap_merge_conflicts_total", map[string]string{"type": "kind_mismatch"}))

	size := testutil.MetricHistogram(m, "airgap_bundle_size_bytes", nil)
	require.NotNil(t, size)
	require.Equal(t, uint64(2), size.GetSampleCount(), "the two bundles imported")
	require.Equal(t, float64(firstSize+reusedBSize), size.GetSampleSum(), "their sizes on disk")
	duration := testutil.MetricHistogram(m, "airgap_sync_duration_seconds", map[string]string{"operation": "import"})
	require.NotNil(t, duration)
	require.Equal(t, uint64(4), duration.GetSampleCount(), "every import, the refused one too")
	require.Greater(t, duration.GetSampleSum(), 0.0)
	require.Less(t, duration.GetSampleSum(), took, "seconds, within the time the imports took")
	entries := testutil.MetricHistogram(m, "airgap_merge_entries_count", nil)
	require.NotNil(t, entries)
	require.Equal(t, uint64(4), entries.GetSampleCount())
	require.Equal(t, 9.0, entries.GetSampleSum(), "3, 3 again, 1+1 refused, 1")
	require.Equal(t, map[float64]uint64{1: 1, 10: 4}, cumulativeCounts(entries, 1, 10))
}

// cumulativeCounts is h's count at or below each of bounds.
func cumulativeCounts(h *dto.Histogram, bounds ...float64) map[float64]uint64 {
	counts := map[float64]uint64{}
	for _, b := range h.GetBucket() {
		for _, bound := range bounds {
			if b.GetUpperBound() == bound {
				counts[bound] = b.GetCumulativeCount()
			}
		}
	}
	return counts
}

// A bundle carrying a notification central already delivered (it came by
// an earlier bundle, or online) gets a receipt with central's record of
// it: status, retry count, last attempt and delivery, which the site then
// answers with.
func TestReceiptCarriesCentralsRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	store, err := centralstore.OpenSQLite(ctx, filepath.Join(dir, "central.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	path, _ := exportSite(t, dir, "node-a", "tank-1")
	bundles, err := airgapsync.ReadBundles([]string{path})
	require.NoError(t, err)
	id := bundles[0].JobLogs[0].Entries[0].JobID

	attempted := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	delivered := attempted.Add(time.Minute)
	_, _, err = store.InsertNotification(ctx, centralstore.Notification{NotificationID: id, Type: contract.NotificationTypeEmail,
		ListName: "ops", Subject: "tank-1 on node-a", Status: contract.StatusPending, SourceSiteID: "ship-7", CreatedAt: attempted})
	require.NoError(t, err)
	require.NoError(t, store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{NotificationID: id, Status: contract.StatusRetrying,
		RetryCount: 1, LastError: "smtp down", LastAttemptAt: &attempted}))
	require.NoError(t, store.MarkNotificationDelivered(ctx, id, delivered, []string{"ops@example.com"}))

	im := &airgapsync.Importer{Temporal: temporalStub{}, Store: store}
	res, err := im.Import(ctx, bundles, airgapsync.ImportOptions{Verify: airgap.VerifyOptions{AllowUnsigned: true}, By: "ana", Now: time.Now().UTC()})
	require.NoError(t, err)
	require.NotNil(t, res.Receipt)
	require.Len(t, res.Receipt.Accepted, 1)
	got := res.Receipt.Accepted[0]
	require.Equal(t, string(contract.StatusDelivered), got.Status)
	require.Equal(t, 1, got.RetryCount)
	require.NotNil(t, got.DeliveredAt)
	require.Equal(t, delivered, got.DeliveredAt.UTC())
	require.NotNil(t, got.LastAttemptAt)
}
