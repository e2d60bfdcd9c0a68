package centralstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// The SQL Server statements get numbered placeholders, one per argument, and
// the insert's existence check reuses the id (@p1).
func TestSQLServerPlaceholders(t *testing.T) {
	t.Parallel()
	s := &Store{dialect: sqlServerDialect}
	q := s.bind(s.dialect.insertIfMissing)
	require.NotContains(t, q, "?")
	require.Contains(t, q, "@p19")
	require.NotContains(t, q, "@p20")
	require.Contains(t, q, "WHERE notification_id = @p1)")
	require.Equal(t, 19, strings.Count(q, "@p")-1)
	require.Equal(t, "a = @p1 AND b = @p2", s.bind("a = ? AND b = ?"))
}

// A full chunk of the site_calls MERGE stays under SQL Server's 2,100
// parameters, one per column and row, and ends with the semicolon MERGE
// requires.
func TestSQLServerSiteCallChunkFits(t *testing.T) {
	t.Parallel()
	s := &Store{dialect: sqlServerDialect}
	rows := s.dialect.siteCallChunk
	statements := s.dialect.upsertSiteCalls(rows)
	require.Len(t, statements, 1)
	q := s.bind(statements[0])
	require.NotContains(t, q, "?")
	require.Equal(t, rows*len(siteCallColumns), strings.Count(q, "@p"))
	require.Less(t, rows*len(siteCallColumns), 2100)
	require.Greater(t, (rows+1)*len(siteCallColumns), 2099)
	require.True(t, strings.HasSuffix(q, ";"))
}

func TestLatestBySeq(t *testing.T) {
	t.Parallel()
	rows := []contract.TrackedOperation{
		{OperationID: "a", Seq: 2}, {OperationID: "b", Seq: 5}, {OperationID: "a", Seq: 7},
		{OperationID: "b", Seq: 4}, {OperationID: "a", Seq: 7, Status: contract.StatusFailed},
	}
	require.Equal(t, []contract.TrackedOperation{{OperationID: "a", Seq: 7}, {OperationID: "b", Seq: 5}}, latestBySeq(rows))
}

// A full chunk of the audit_log MERGE stays under SQL Server's 2,100
// parameters and ends with the semicolon MERGE requires.
func TestSQLServerAuditChunkFits(t *testing.T) {
	t.Parallel()
	s := &Store{dialect: sqlServerDialect}
	rows := s.dialect.auditChunk
	q := s.bind(s.dialect.insertAuditEvents(rows))
	require.NotContains(t, q, "?")
	require.Equal(t, rows*len(auditColumns), strings.Count(q, "@p"))
	require.Less(t, rows*len(auditColumns), 2100)
	require.Greater(t, (rows+1)*len(auditColumns), 2099)
	require.True(t, strings.HasSuffix(q, ";"))
}

// Both dialects' batch deletes take the cutoff first and the limit second.
func TestDeleteBatchArguments(t *testing.T) {
	t.Parallel()
	where := `status IN ('Delivered') AND terminal_at < ?`
	sqlServer := &Store{dialect: sqlServerDialect}
	require.Equal(t, `DELETE TOP (@p2) FROM site_calls WHERE status IN ('Delivered') AND terminal_at < @p1`,
		sqlServer.bind(sqlServer.dialect.deleteBatch("site_calls", "operation_id", where)))
	sqlite := &Store{dialect: sqliteDialect}
	q := sqlite.bind(sqlite.dialect.deleteBatch("site_calls", "operation_id", where))
	require.Equal(t, 2, strings.Count(q, "?"))
	require.Less(t, strings.Index(q, "terminal_at < ?"), strings.Index(q, "LIMIT ?"))
}

func TestTruncateKeepsCharacters(t *testing.T) {
	t.Parallel()
	require.Equal(t, "éé", truncate("ééé", 2))
	require.Equal(t, "abc", truncate("abc", 3))
}
