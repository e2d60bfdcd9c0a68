package testutil

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// QueryPlan is SQLite's EXPLAIN QUERY PLAN of query on db, one step a
// line: tests check that a hot query seeks an index instead of scanning.
func QueryPlan(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
		plan.WriteString(detail + "\n")
	}
	require.NoError(t, rows.Err())
	return plan.String()
}

// PostgresQueryPlan is PostgreSQL's EXPLAIN of query on db, with sequential
// scans priced out (enable_seqscan off, on one connection): on a test's few
// rows the planner would rightly scan the table, so the plan shows instead
// whether an index can serve the query. A query no index serves still
// shows its "Seq Scan".
func PostgresQueryPlan(t *testing.T, db *sql.DB, query string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx, "SET enable_seqscan = off")
	require.NoError(t, err)
	defer conn.ExecContext(ctx, "RESET enable_seqscan")
	rows, err := conn.QueryContext(ctx, "EXPLAIN "+query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var plan strings.Builder
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	return plan.String()
}
