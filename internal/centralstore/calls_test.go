package centralstore

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// callFilterCombinations is every combination of the call list's equality
// filters (status, kind, site, target), each as a first page and as a later
// page within a time range.
func callFilterCombinations(now time.Time) map[string]CallFilter {
	after := &Cursor{CreatedAt: now, ID: "343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11"}
	out := map[string]CallFilter{}
	for mask := range 16 {
		var f CallFilter
		var names []string
		if mask&1 != 0 {
			f.Status, names = contract.StatusDelivered, append(names, "status")
		}
		if mask&2 != 0 {
			f.Kind, names = contract.KindDatabaseWrite, append(names, "kind")
		}
		if mask&4 != 0 {
			f.Site, names = "plant-1", append(names, "site")
		}
		if mask&8 != 0 {
			f.Target, names = "erp.createOrder", append(names, "target")
		}
		name := strings.Join(names, "+")
		if name == "" {
			name = "no filter"
		}
		out[name+", first page"] = f
		f.After, f.CreatedFrom, f.CreatedTo = after, now.Add(-24*time.Hour), now
		out[name+", later page in a time range"] = f
	}
	return out
}

// Every page of the call list is a range of one index in the list's
// order, whatever the filters: at ten million rows a scan of the table, or
// a sort of every row one site or status has, takes seconds. SQLite's plan
// seeks an index (or, with no filter but the kind, walks the time index
// from its newest end and stops at the page's end), never scans the table
// and sorts nothing but rows that share a created time. (outpost bench
// --only tables times the pages on 10,000,000 rows.)
func TestCallPagesSeekAnIndex(t *testing.T) {
	store := openSQLiteForTest(t)
	for name, f := range callFilterCombinations(time.Now().UTC()) {
		where, args, err := callWhere(f)
		require.NoError(t, err)
		plan := testutil.QueryPlan(t, store.db, listCallsSQL(where)+" LIMIT 51", args...)
		require.NotContains(t, plan, "SCAN site_calls\n", "%s: %s", name, plan)
		require.NotContains(t, plan, "TEMP B-TREE FOR ORDER BY", "%s: sorted in memory: %s", name, plan)
		if f.Status == "" && f.Site == "" && f.Target == "" && f.After == nil {
			require.Contains(t, plan, "SCAN site_calls USING INDEX site_calls_created\n", "%s: %s", name, plan)
			continue
		}
		require.Contains(t, plan, "SEARCH site_calls USING INDEX site_calls_", "%s: %s", name, plan)
		if f.After != nil {
			require.Contains(t, plan, "created_at<", "%s: the cursor is a range on the index: %s", name, plan)
		}
	}
}
