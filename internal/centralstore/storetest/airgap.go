package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/airgapstats"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// airgapImports: an import's record reads back whole; a bundle is
// recorded once, its first record kept, and a run repeating it records
// nothing at all; a refused run counts its conflicts. The stats grow by
// exactly what was recorded (they are compared before and after, as a SQL
// Server database may hold earlier runs).
func airgapImports(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	id := uuid.NewString()
	_, err := store.GetAirgapImport(ctx, id)
	require.ErrorIs(t, err, centralstore.ErrNotFound)
	before := airgapStats(t, store)

	at := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	imp := centralstore.AirgapImport{
		BundleID: id, SiteID: "ship-7", Nodes: []string{"node-a", "node-b"},
		Entries: 1100, Imported: 1000, Duplicates: 100, Skipped: 0,
		ChainHeads: []string{"node-a=q83v", "node-b=3q2+"}, ImportedBy: "ana",
		ImportedAt: at, Bytes: 300 << 10,
	}
	run := centralstore.AirgapImportRun{
		RunID: uuid.NewString(), Outcome: centralstore.AirgapImported, BundleIDs: []string{id},
		Entries: 1100, Imported: 1000, Duplicates: 100, Duration: 2 * time.Second, ImportedBy: "ana", At: at,
	}
	require.NoError(t, store.RecordAirgapImport(ctx, run, imp))
	got, err := store.GetAirgapImport(ctx, id)
	require.NoError(t, err)
	require.Equal(t, imp, got)

	again, rerun := imp, run
	again.ImportedBy, rerun.RunID = "bob", uuid.NewString()
	require.Error(t, store.RecordAirgapImport(ctx, rerun, again), "a bundle is recorded once")
	got, err = store.GetAirgapImport(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "ana", got.ImportedBy)

	refused := centralstore.AirgapImportRun{
		RunID: uuid.NewString(), Outcome: centralstore.AirgapRefused, BundleIDs: []string{uuid.NewString(), uuid.NewString()},
		Entries: 7, Conflicts: map[string]int{"payload-mismatch": 2, "kind-mismatch": 1},
		Duration: 30 * time.Millisecond, ImportedBy: "ana", At: at,
	}
	require.NoError(t, store.RecordAirgapImport(ctx, refused))

	after := airgapStats(t, store)
	require.Equal(t, before.Bundles+1, after.Bundles, "the failed rerun recorded no bundle")
	requireGrew(t, before.BundleBytes, after.BundleBytes, 1, 300<<10, map[float64]uint64{256 << 10: 0, 1 << 20: 1})
	require.Equal(t, before.Imported+1000, after.Imported, "the failed rerun recorded no run")
	require.Equal(t, before.Duplicates+100, after.Duplicates)
	require.Equal(t, before.Conflicts["payload-mismatch"]+2, after.Conflicts["payload-mismatch"])
	require.Equal(t, before.Conflicts["kind-mismatch"]+1, after.Conflicts["kind-mismatch"])
	requireGrew(t, before.Duration, after.Duration, 2, 2.03, map[float64]uint64{0.01: 0, 0.05: 1, 1: 1, 5: 2})
	requireGrew(t, before.Entries, after.Entries, 2, 1107, map[float64]uint64{1: 0, 10: 1, 1000: 1, 10000: 2})
}

func airgapStats(t *testing.T, store *centralstore.Store) centralstore.AirgapImportStats {
	t.Helper()
	st, err := store.AirgapImportStats(context.Background())
	require.NoError(t, err)
	return st
}

// requireGrew checks that histogram after holds count more samples than
// before, summing sum, with buckets more in the buckets named.
func requireGrew(t *testing.T, before, after airgapstats.Histogram, count uint64, sum float64, buckets map[float64]uint64) {
	t.Helper()
	require.Equal(t, before.Count+count, after.Count, "samples")
	require.InDelta(t, before.Sum+sum, after.Sum, 1e-6, "sum")
	for bound, n := range buckets {
		require.Equal(t, before.Buckets[bound]+n, after.Buckets[bound], "bucket %v", bound)
	}
}
