package centralstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// A full chunk's statement is prepared once and kept; a shorter chunk's is
// not (there would be one per size). Rows and events go through both the
// same: every one is stored.
func TestOnlyFullChunksKeepTheirStatements(t *testing.T) {
	ctx := context.Background()
	store := openSQLiteForTest(t)
	chunk := store.dialect.siteCallChunk
	batch := func(from, n int) ([]contract.TrackedOperation, []AuditEvent) {
		now := time.Now().UTC()
		rows := make([]contract.TrackedOperation, n)
		events := make([]AuditEvent, n)
		for i := range rows {
			id := fmt.Sprintf("call-%d", from+i)
			rows[i] = contract.TrackedOperation{OperationID: id, Kind: contract.KindExternalCall, Target: "erp.createOrder",
				Status: contract.StatusDelivered, SourceSiteID: "plant-1", CreatedAt: now, UpdatedAt: now, Seq: int64(from + i + 1)}
			events[i] = AuditEvent{EventID: "call/" + id + "/enqueued", OperationID: id, Kind: contract.KindExternalCall,
				SiteID: "plant-1", Event: AuditEnqueued, Status: contract.StatusPending, At: now}
		}
		return rows, events
	}

	for round := range 2 {
		rows, _ := batch(round*(chunk+3), chunk+3) // one full chunk and 3 rows
		n, err := store.UpsertSiteCalls(ctx, rows)
		require.NoError(t, err)
		require.Equal(t, chunk+3, n)
	}
	require.Len(t, store.chunks.byQuery, 1, "the full site_calls chunk's statement, once")

	rows, events := batch(10_000, store.dialect.auditChunk+3)
	_, err := store.UpsertSiteCalls(ctx, rows[:1], events...)
	require.NoError(t, err)
	require.Len(t, store.chunks.byQuery, 2, "and the full audit chunk's")

	var calls, stored int
	require.NoError(t, store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM site_calls`).Scan(&calls))
	require.NoError(t, store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log`).Scan(&stored))
	require.Equal(t, 2*(chunk+3)+1, calls)
	require.Equal(t, store.dialect.auditChunk+3, stored)

	require.NoError(t, store.Close())
	require.Nil(t, store.chunks.byQuery, "closing the store closes them")
}
