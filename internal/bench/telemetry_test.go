package bench

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// BenchmarkAuditedTelemetryWrite is the central store's write of one
// telemetry batch of 1,000 changes with their audit events, as the ingest
// makes it, one batch a transaction, without Temporal: the writer's own
// cost, to profile with -cpuprofile (outpost bench --only telemetry times
// the whole ingest). Each iteration writes a new batch into one growing
// store.
func BenchmarkAuditedTelemetryWrite(b *testing.B) {
	ctx := context.Background()
	store, err := centralstore.OpenSQLite(ctx, filepath.Join(b.TempDir(), "central.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	batches := telemetryBatches("audited", b.N*1000, 1000)
	b.ResetTimer()
	for _, batch := range batches {
		if _, err := store.UpsertSiteCallsAudited(ctx, batch.Rows, audit.SiteCallChanges); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "changes/s")
}
