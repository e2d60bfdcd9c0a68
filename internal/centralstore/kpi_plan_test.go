package centralstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testutil"
)

// The KPIs and the parked lists read an index range, never a table: at a
// year of rows a scan of either table takes seconds (outpost bench --only
// tables times them on 10,000,000 rows each). SQLite's plans name an index
// and no full scan; the queued counts and the notification deliveries read
// the index alone, the queued counts in its order.
func TestKPIsAndParkedListsSeekIndexes(t *testing.T) {
	store := openSQLiteForTest(t)
	now := time.Now().UTC()
	plans := map[string]planCase{
		"queued notifications":    {kpiQueuedQueries[0], []any{now}, "COVERING INDEX notifications_status_site_created"},
		"queued calls":            {kpiQueuedQueries[1], []any{now}, "COVERING INDEX site_calls_status_site_created"},
		"delivered notifications": {kpiDeliveredQueries[0], []any{now, now, now}, "COVERING INDEX notifications_status_delivered"},
		"delivered calls":         {kpiDeliveredQueries[1], []any{now, now, now}, "INDEX site_calls_status_terminal"},
	}
	for name, site := range map[string]string{"parked": "", "parked of a site": "plant-1"} {
		f := ItemFilter{Status: "Parked", Site: site}
		state, stateArgs, err := itemState(f.Status, now)
		require.NoError(t, err)
		where, args := itemWhere(f, state, stateArgs, "list_name", "subject")
		plans[name+" notifications"] = planCase{notificationItemsSQL(where) + store.limitClause(), append(args, 201), "INDEX notifications_status_"}
		where, args = itemWhere(f, state, stateArgs, "target", "target")
		plans[name+" calls"] = planCase{callItemsSQL(where) + store.limitClause(), append(args, 201), "INDEX site_calls_"}
	}
	for name, p := range plans {
		plan := testutil.QueryPlan(t, store.db, p.query, p.args...)
		require.Contains(t, plan, "USING "+p.index, "%s: %s", name, plan)
		require.NotContains(t, plan, "SCAN ", "%s: %s", name, plan)
	}
	for _, query := range kpiQueuedQueries {
		plan := testutil.QueryPlan(t, store.db, query, now)
		require.NotContains(t, plan, "TEMP B-TREE", "grouped in the index's order, not sorted: %s", plan)
	}
}

// The daily purge deletes each table's due rows through an index, batch by
// batch: at a year of rows a scan per batch would take seconds, a thousand
// times a run.
func TestPurgeSeeksIndexes(t *testing.T) {
	store := openSQLiteForTest(t)
	indexes := map[string]string{
		"notifications": "notifications_status_terminal",
		"site_calls":    "site_calls_status_terminal",
		"audit_log":     "audit_log_at_node",
	}
	require.Len(t, purgeTargets, len(indexes))
	for _, target := range purgeTargets {
		stmt := store.dialect.deleteBatch(target.table, target.key, target.where)
		plan := testutil.QueryPlan(t, store.db, stmt, time.Now().UTC(), 1000)
		require.Contains(t, plan, " INDEX "+indexes[target.table]+" (", "%s: %s", target.table, plan)
		require.NotContains(t, plan, "SCAN ", "%s: %s", target.table, plan)
	}
}

// nodeEventsSQL is how an operator reads one site node's events over a
// window of time (docs/operating.md shows it).
const nodeEventsSQL = `SELECT event_id, event, status, at, carried FROM audit_log
	WHERE at >= ? AND at < ? AND site_id = ? AND source_node = ? ORDER BY at`

// One node's events over a window of time come from a range of the time
// index, in its order: no scan of the table and no sort.
func TestNodeEventsSeekTheTimeIndex(t *testing.T) {
	store := openSQLiteForTest(t)
	now := time.Now().UTC()
	plan := testutil.QueryPlan(t, store.db, nodeEventsSQL, now.Add(-time.Hour), now, "plant-1", "node-b")
	require.Contains(t, plan, "USING INDEX audit_log_at_node (at>? AND at<?)", plan)
	require.NotContains(t, plan, "SCAN ", plan)
	require.NotContains(t, plan, "TEMP B-TREE", "read in the index's order, not sorted: %s", plan)
}

// planCase is a query, its arguments and the index its plan must use.
type planCase struct {
	query string
	args  []any
	index string
}

// The KPIs read one snapshot, in a read-only transaction: they do not wait
// for SQLite's write lock, which an ingest or a purge batch may hold (an
// IMMEDIATE transaction, as writes begin, would wait up to the busy
// timeout of 10 s).
func TestKPIsReadWhileAWriterHoldsTheLock(t *testing.T) {
	ctx := context.Background()
	store := openSQLiteForTest(t)
	writer, err := store.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: the write lock
	require.NoError(t, err)
	defer writer.Rollback()
	_, err = writer.ExecContext(ctx, `UPDATE site_cursors SET reconciled_seq = 0`)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = store.KPIs(ctx, KPIQuery{Now: time.Now(), StuckAge: time.Hour, Window: time.Hour})
	require.NoError(t, err, "the KPIs waited for the write lock")
}

// An operation's audit trail (the outbox's item page) seeks the primary key
// for a notification's and a cached call's events and the definitions'
// index for a list's or channel's: at a year of events a scan takes
// seconds, and no index by operation id is kept for the others.
func TestAuditTrailSeeksIndexes(t *testing.T) {
	store := openSQLiteForTest(t)
	plan := testutil.QueryPlan(t, store.db, listAuditEventsSQL, auditEventsArgs("9b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11")...)
	require.Equal(t, 2, strings.Count(plan, "USING INDEX sqlite_autoindex_audit_log_1 (event_id>? AND event_id<?)"), plan)
	require.Contains(t, plan, "USING INDEX audit_log_definitions (operation_id=?)", plan)
	require.NotContains(t, plan, "SCAN ", plan)
}
