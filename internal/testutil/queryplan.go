package testutil

import (
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
