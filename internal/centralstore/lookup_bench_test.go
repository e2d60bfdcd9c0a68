package centralstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// BenchmarkLookupAfterCommit reads a notification list, as each first
// delivery attempt does, right after another connection committed a
// notification's row: on a central worker, notifications in flight commit
// all the time, so nearly every lookup finds the file changed since its
// connection's last read.
func BenchmarkLookupAfterCommit(b *testing.B) {
	ctx := context.Background()
	store, err := OpenSQLite(ctx, b.TempDir()+"/central.db")
	require.NoError(b, err)
	defer store.Close()
	require.NoError(b, store.PutList(ctx, List{Name: "ops", Type: contract.NotificationTypeEmail,
		Targets: []string{"ops@example.com"}, TypeData: "{}", UpdatedBy: "bench"}, "bench"))
	var lookups time.Duration
	for i := 0; b.Loop(); i++ {
		n := Notification{NotificationID: fmt.Sprintf("n-%d", i), Type: contract.NotificationTypeEmail, TypeData: "{}",
			ListName: "ops", Subject: "s", Body: "b", Status: contract.StatusPending, SourceSiteID: "plant-1",
			SiteEnqueuedAt: time.Now(), CreatedAt: time.Now()}
		_, _, err := store.InsertNotification(ctx, n)
		require.NoError(b, err)
		start := time.Now()
		_, err = store.GetList(ctx, "ops")
		lookups += time.Since(start)
		require.NoError(b, err)
	}
	b.ReportMetric(float64(lookups.Microseconds())/float64(b.N), "lookup-µs/op")
}
