package centralstore

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
