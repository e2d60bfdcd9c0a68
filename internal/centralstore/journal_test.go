package centralstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// oeAbort is SQLite's ABORT conflict resolution as OP_Halt's P2 names it.
const oeAbort = 2

// abortingHalts lists the OP_Halt instructions of query's program that end
// it with ABORT on a constraint: SQLite gives a statement holding one, and
// writing more than one row, a statement journal inside a transaction.
func abortingHalts(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+query, make([]any, strings.Count(query, "?"))...)
	require.NoError(t, err)
	defer rows.Close()
	var halts []string
	for rows.Next() {
		var addr, p1, p2, p3 int
		var opcode string
		var p4, p5, comment sql.NullString
		require.NoError(t, rows.Scan(&addr, &opcode, &p1, &p2, &p3, &p4, &p5, &comment))
		if (opcode == "Halt" || opcode == "HaltIfNull") && p1 != 0 && p2 == oeAbort {
			halts = append(halts, fmt.Sprintf("%d: %s %d %d %s", addr, opcode, p1, p2, p4.String))
		}
	}
	require.NoError(t, rows.Err())
	return halts
}

// Telemetry's writes on SQLite, the site_calls upsert and the audit
// events' insert, need no statement journal: it copied every page each
// chunk changed before changing it, a temporary file past 64 KiB, about
// a seventh of the writer's CPU. The shared ON CONFLICT DO UPDATE shows
// what the check looks for.
func TestTelemetryWritesNeedNoStatementJournal(t *testing.T) {
	store := openSQLiteForTest(t)
	require.NotEmpty(t, abortingHalts(t, store.db, upsertSiteCallsOnConflict(3)), "DO UPDATE checks its columns with ABORT")
	statements := append(store.dialect.upsertSiteCalls(store.dialect.siteCallChunk), store.dialect.insertAuditEvents(store.dialect.auditChunk))
	for _, query := range statements {
		require.Empty(t, abortingHalts(t, store.db, query), "%.80s…", query)
	}
}

// The update of the stored rows reads each row of the batch by the primary
// key: a scan of site_calls would cost a year of rows every chunk.
func TestSiteCallsUpdateSeeksThePrimaryKey(t *testing.T) {
	store := openSQLiteForTest(t)
	statements := store.dialect.upsertSiteCalls(2)
	require.Len(t, statements, 2)
	plan := testutil.QueryPlan(t, store.db, statements[1], make([]any, 2*len(siteCallColumns))...)
	require.Contains(t, plan, "SEARCH site_calls USING INDEX sqlite_autoindex_site_calls_1 (operation_id=?)", plan)
	require.NotContains(t, plan, "SCAN site_calls", plan)
}

// The upsert inserts the new ids, replaces a stored row only with a higher
// seq, and counts the rows it inserted or replaced, in a full chunk (its
// statements kept prepared) and in a short one alike.
func TestUpsertSiteCallsKeepsTheHigherSeq(t *testing.T) {
	ctx := context.Background()
	store := openSQLiteForTest(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	row := func(i int, seq int64, status contract.Status) contract.TrackedOperation {
		return contract.TrackedOperation{OperationID: fmt.Sprintf("call-%04d", i), Kind: contract.KindExternalCall,
			Target: "erp.createOrder", Status: status, SourceSiteID: "plant-1", CreatedAt: now, UpdatedAt: now, Seq: seq}
	}
	for _, n := range []int{store.dialect.siteCallChunk, 7} {
		t.Run(fmt.Sprintf("%d rows", n), func(t *testing.T) {
			first := make([]contract.TrackedOperation, n)
			for i := range first {
				first[i] = row(n*10_000+i, 5, contract.StatusPending)
			}
			written, err := store.UpsertSiteCalls(ctx, first)
			require.NoError(t, err)
			require.Equal(t, n, written, "every new id")

			// The even rows come again with a higher seq, the odd ones with a
			// lower one, and one id is new.
			second := make([]contract.TrackedOperation, n)
			for i := range second {
				seq, status := int64(9), contract.StatusDelivered
				if i%2 == 1 {
					seq, status = 3, contract.StatusFailed
				}
				second[i] = row(n*10_000+i, seq, status)
			}
			second[n-1] = row(n*10_000+n, 1, contract.StatusPending)
			written, err = store.UpsertSiteCalls(ctx, second)
			require.NoError(t, err)
			require.Equal(t, n/2+1, written, "the rows with a higher seq and the new id")

			for i := range n + 1 {
				got, err := store.GetSiteCall(ctx, fmt.Sprintf("call-%04d", n*10_000+i))
				require.NoError(t, err)
				want := first[min(i, n-1)]
				switch {
				case i == n:
					want = second[n-1]
				case i == n-1:
				case i%2 == 0:
					want = second[i]
				}
				require.Equal(t, want.Seq, got.Seq, "row %d", i)
				require.Equal(t, want.Status, got.Status, "row %d", i)
			}
		})
	}
}
