package centralstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// SQLite hands back MIN over a DATETIME column as the text the driver
// wrote; SQL Server as a time. Both read back as the same instant.
func TestDBTimeScan(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 3, 4, 5, 6, 7, 120_000_000, time.UTC)
	for _, v := range []any{want, want.String(), []byte(want.String()), "2026-03-04 05:06:07.12+00:00", "2026-03-04T05:06:07.12Z"} {
		var got dbTime
		require.NoError(t, got.Scan(v), "%v", v)
		require.True(t, got.Valid)
		require.True(t, want.Equal(got.Time), "%v: got %s", v, got.Time)
	}
	var null dbTime
	require.NoError(t, null.Scan(nil))
	require.False(t, null.Valid)
	require.Nil(t, null.ptr())
	require.Error(t, null.Scan("yesterday"))
	require.Error(t, null.Scan(42))
}

// SQL Server has no LIMIT: the listing ends with OFFSET/FETCH and its
// count is the last numbered parameter. PostgreSQL's LIMIT takes the last
// of its $-numbered parameters.
func TestLimitClause(t *testing.T) {
	t.Parallel()
	sqlite := &Store{dialect: sqliteDialect}
	require.Equal(t, "SELECT 1 ORDER BY x LIMIT ?", sqlite.bind("SELECT 1 ORDER BY x"+sqlite.limitClause()))
	mssql := &Store{dialect: sqlServerDialect}
	require.Equal(t, "SELECT 1 WHERE a = @p1 ORDER BY x OFFSET 0 ROWS FETCH NEXT @p2 ROWS ONLY",
		mssql.bind("SELECT 1 WHERE a = ? ORDER BY x"+mssql.limitClause()))
	pg := &Store{dialect: postgresDialect}
	require.Equal(t, "SELECT 1 WHERE a = $1 ORDER BY x LIMIT $2", pg.bind("SELECT 1 WHERE a = ? ORDER BY x"+pg.limitClause()))
	require.Equal(t, `100\%\_ \[x] a\\b`, likeEscaper.Replace(`100%_ [x] a\b`))
}
