package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/centralstore"
)

// airgapImports: an import's record reads back whole; a bundle is
// recorded once, its first record kept.
func airgapImports(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	id := uuid.NewString()
	_, err := store.GetAirgapImport(ctx, id)
	require.ErrorIs(t, err, centralstore.ErrNotFound)

	imp := centralstore.AirgapImport{
		BundleID: id, SiteID: "ship-7", Nodes: []string{"node-a", "node-b"},
		Entries: 1100, Imported: 1000, Duplicates: 100, Skipped: 0,
		ChainHeads: []string{"node-a=q83v", "node-b=3q2+"}, ImportedBy: "ana",
		ImportedAt: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC),
	}
	require.NoError(t, store.RecordAirgapImport(ctx, imp))
	got, err := store.GetAirgapImport(ctx, id)
	require.NoError(t, err)
	require.Equal(t, imp, got)

	again := imp
	again.ImportedBy = "bob"
	require.Error(t, store.RecordAirgapImport(ctx, again), "a bundle is recorded once")
	got, err = store.GetAirgapImport(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "ana", got.ImportedBy)
}
