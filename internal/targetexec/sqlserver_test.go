package targetexec

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/targets"
)

// TestSQLServerWrite runs against a real server when OUTPOST_MSSQL_DSN is set.
func TestSQLServerWrite(t *testing.T) {
	dsn := os.Getenv("OUTPOST_MSSQL_DSN")
	if dsn == "" {
		t.Skip("SQL Server cannot run on these machines: set OUTPOST_MSSQL_DSN=sqlserver://user:pass@host:1433?database=outpost_test to run the SQL Server write tests")
	}
	t.Parallel()
	r := newExecutor(nil, map[string]targets.Database{"mes": {Driver: targets.DriverSQLServer, DSN: dsn, Timeout: 30 * time.Second}})
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	table := fmt.Sprintf("outpost_targets_%d", time.Now().UnixNano())
	_, err := r.Execute(t.Context(), write("mes", "CREATE TABLE "+table+" (id INT PRIMARY KEY, tag NVARCHAR(100) NOT NULL)"))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := r.Execute(t.Context(), write("mes", "DROP TABLE "+table))
		require.NoError(t, err)
	})

	res, err := r.Execute(t.Context(), write("mes", "INSERT INTO "+table+" (id, tag) VALUES (@p1, @p2)", 1, "O'Brien"))
	require.NoError(t, err)
	require.Equal(t, int64(1), res.RowsAffected)

	_, err = r.Execute(t.Context(), write("mes", "INSRT INTO "+table+" VALUES (@p1)", 2))
	requireFailure(t, err, true)
	_, err = r.Execute(t.Context(), write("mes", "INSERT INTO "+table+" (id, tag) VALUES (@p1, @p2)", 1, "dup"))
	requireFailure(t, err, true)
}
