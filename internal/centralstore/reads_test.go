package centralstore

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// Reads outside a write go to a pool of their own: query-only, with
// SQLite's small default page cache, while the writers keep 8 MiB. A
// reader's cache is emptied by every other connection's commit, and
// emptying 64 MiB stalled the KPIs and the purge together for hundreds of
// milliseconds (outpost bench --only tables). The readers still see every
// committed write at once.
func TestReadsHaveTheirOwnQueryOnlyPoolWithASmallCache(t *testing.T) {
	ctx := context.Background()
	store := openSQLiteForTest(t)
	require.NotSame(t, store.db, store.reads)

	cacheSize := func(db *sql.DB) int {
		var pages int
		require.NoError(t, db.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&pages))
		return pages
	}
	require.Equal(t, -8192, cacheSize(store.db), "writers keep an 8 MiB page cache")
	require.Equal(t, -2000, cacheSize(store.reads), "readers keep SQLite's default page cache")

	_, err := store.reads.ExecContext(ctx, `DELETE FROM site_calls`)
	require.ErrorContains(t, err, "readonly", "the readers' pool must refuse writes")

	now := time.Now().UTC()
	row := contract.TrackedOperation{OperationID: "call-1", Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Status: contract.StatusParked, SourceSiteID: "plant-1", CreatedAt: now, UpdatedAt: now, Seq: 1}
	_, err = store.UpsertSiteCalls(ctx, []contract.TrackedOperation{row})
	require.NoError(t, err)
	report, err := store.KPIs(ctx, KPIQuery{Now: now, StuckAge: time.Minute, Window: time.Hour})
	require.NoError(t, err)
	require.Equal(t, 1, report.Global.Total.Parked, "a read after a commit sees it")
}

// The purge deletes through one connection of its own with a 64 MiB page
// cache, which the worker's other writes do not share: a worker's writers
// keep 8 MiB (a central worker's memory), and the purge, reading every
// index of a year of rows, keeps its speed. The connection, and its cache,
// is closed once the purge has been idle for a while.
func TestPurgeHasItsOwnConnectionWithABigCache(t *testing.T) {
	ctx := context.Background()
	store := openSQLiteForTest(t)
	require.NotSame(t, store.db, store.purges)

	var pages int
	require.NoError(t, store.purges.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&pages))
	require.Equal(t, -65536, pages, "the purge keeps a 64 MiB page cache")
	stats := store.purges.Stats()
	require.Equal(t, 1, stats.MaxOpenConnections, "one purge connection: one cache")

	now := time.Now().UTC()
	row := contract.TrackedOperation{OperationID: "call-1", Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Status: contract.StatusDelivered, SourceSiteID: "plant-1", CreatedAt: now, UpdatedAt: now, TerminalAt: &now, Seq: 1}
	_, err := store.UpsertSiteCalls(ctx, []contract.TrackedOperation{row})
	require.NoError(t, err)
	res, err := store.Purge(ctx, PurgeRequest{SiteCallsBefore: now.Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, 1, res.SiteCalls, "the purge's connection deletes what the writers wrote")
}
