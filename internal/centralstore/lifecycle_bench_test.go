package centralstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// BenchmarkNotificationLifecycle makes the central store's writes of a
// delivered notification, as a central worker makes them with 8 in flight
// (outpost bench --only e2e): the row and its Enqueued event before the
// attempt, a pause for the send, then the row marked Delivered with its
// events. It reports this process's CPU per notification, which a loaded
// machine skews far less than the rate.
func BenchmarkNotificationLifecycle(b *testing.B) {
	ctx := context.Background()
	store, err := centralstore.OpenSQLite(ctx, filepath.Join(b.TempDir(), "central.db"))
	require.NoError(b, err)
	defer store.Close()
	const inFlight = 8
	var next atomic.Int64
	cpu := testutil.ProcessCPU()
	b.ResetTimer()
	var g errgroup.Group
	for range inFlight {
		g.Go(func() error {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if err := deliverOnce(ctx, store, i); err != nil {
					return err
				}
				time.Sleep(20 * time.Millisecond)
			}
			return nil
		})
	}
	require.NoError(b, g.Wait())
	b.ReportMetric(float64((testutil.ProcessCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// deliverOnce writes notification i's row, waits as a send would, and
// marks it Delivered.
func deliverOnce(ctx context.Context, store *centralstore.Store, i int64) error {
	now := time.Now()
	n := centralstore.Notification{NotificationID: fmt.Sprintf("019ad000-0000-7000-8000-%012d", i),
		Type: contract.NotificationTypeEmail, TypeData: "{}", ListName: "ops", Subject: "alarm", Body: "body of the alarm",
		Status: contract.StatusPending, SourceSiteID: "plant-1", SourceNode: "node-a", SiteEnqueuedAt: now, CreatedAt: now}
	if _, _, err := store.InsertNotification(ctx, n, audit.NotificationEnqueued(n, "")); err != nil {
		return err
	}
	time.Sleep(time.Millisecond)
	at := time.Now()
	recipients := []string{"ops@example.com"}
	return store.MarkNotificationDelivered(ctx, n.NotificationID, at, recipients,
		audit.NotificationDeliveredRows(n.NotificationID, n.SourceSiteID, n.SourceNode, 1, 0, at, recipients)...)
}
