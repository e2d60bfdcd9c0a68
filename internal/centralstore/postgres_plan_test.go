package centralstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/pgserver"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// On PostgreSQL the hot queries have an index to seek, as on SQLite
// (kpi_plan_test.go, notifications_test.go): the KPIs, the parked lists, the
// notification pages, the purge's batches, an operation's audit trail and a
// node's events over a window of time. Which of a table's indexes led by
// status the planner takes depends on statistics an empty table does not
// have, so those cases name the indexes' common prefix (for the parked
// calls of a site, the call list's index by site serves as well).
func TestPostgresQueriesSeekIndexes(t *testing.T) {
	store := OpenPostgresForTest(t)
	now := time.Now().UTC()
	plans := map[string]planCase{
		"queued notifications":    {kpiQueuedQueries[0], []any{now}, "notifications_status_"},
		"queued calls":            {kpiQueuedQueries[1], []any{now}, "site_calls_status_"},
		"delivered notifications": {kpiDeliveredQueries[0], []any{now, now, now}, "notifications_status_"},
		"delivered calls":         {kpiDeliveredQueries[1], []any{now, now, now}, "site_calls_status_"},
		"audit trail":             {listAuditEventsSQL, auditEventsArgs("9b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11"), "audit_log_pkey"},
		"definition trail":        {listAuditEventsSQL, auditEventsArgs("list/ops"), "audit_log_definitions"},
		"node events":             {nodeEventsSQL, []any{now.Add(-time.Hour), now, "plant-1", "node-b"}, "audit_log_at_node"},
	}
	for name, site := range map[string]string{"parked": "", "parked of a site": "plant-1"} {
		f := ItemFilter{Status: "Parked", Site: site}
		state, stateArgs, err := itemState(f.Status, now)
		require.NoError(t, err)
		where, args := itemWhere(f, state, stateArgs, "list_name", "subject")
		plans[name+" notifications"] = planCase{notificationItemsSQL(where) + store.limitClause(), append(args, 201), "notifications_status_"}
		where, args = itemWhere(f, state, stateArgs, "target", "target")
		plans[name+" calls"] = planCase{callItemsSQL(where) + store.limitClause(), append(args, 201), "site_calls_"}
	}
	after := &Cursor{CreatedAt: now, ID: "343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11"}
	for name, f := range map[string]NotificationFilter{"first page": {}, "later page": {After: after}} {
		where, args, err := notificationWhere(f)
		require.NoError(t, err)
		plans[name] = planCase{listNotificationsSQL(where) + store.limitClause(), append(args, 51), "notifications_created"}
	}
	for name, f := range callFilterCombinations(now) {
		where, args, err := callWhere(f)
		require.NoError(t, err)
		plans["calls, "+name] = planCase{listCallsSQL(where) + store.limitClause(), append(args, 51), "site_calls_"}
	}
	purgeIndexes := map[string]string{
		"notifications": "notifications_status_",
		"site_calls":    "site_calls_status_",
		"audit_log":     "audit_log_at_node",
	}
	require.Len(t, purgeTargets, len(purgeIndexes))
	for _, target := range purgeTargets {
		plans["purge "+target.table] = planCase{store.dialect.deleteBatch(target.table, target.key, target.where),
			[]any{now, 1000}, purgeIndexes[target.table]}
	}
	for name, p := range plans {
		plan := testutil.PostgresQueryPlan(t, store.db, store.bind(p.query), p.args...)
		if !assert.Contains(t, plan, " "+p.index, "%s: %s", name, plan) {
			continue
		}
		assert.NotContains(t, plan, "Seq Scan", "%s: %s", name, plan)
	}
}

// OpenPostgresForTest opens the store on a new database of a PostgreSQL
// started for the test; exported for the suite in store_test.go.
func OpenPostgresForTest(t *testing.T) *Store {
	t.Helper()
	srv := pgserver.StartForTest(t)
	ctx := context.Background()
	require.NoError(t, srv.CreateDatabase(ctx, "central"))
	store, err := OpenPostgres(ctx, srv.DSN("central"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return store
}
