package centralstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/centralstore/storetest"
)

func TestSQLite(t *testing.T) {
	store, err := centralstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "central.db"))
	require.NoError(t, err)
	defer store.Close()
	storetest.Exercise(t, store)
}

// SQL Server cannot run on the project's machines; this runs the same suite
// against a real server when OUTPOST_MSSQL_DSN is set.
func TestSQLServer(t *testing.T) {
	dsn := os.Getenv("OUTPOST_MSSQL_DSN")
	if dsn == "" {
		t.Skip("SQL Server cannot run on these machines: set OUTPOST_MSSQL_DSN=sqlserver://user:pass@host:1433?database=outpost_test to run the central store suite against SQL Server")
	}
	store, err := centralstore.OpenSQLServer(context.Background(), dsn)
	require.NoError(t, err)
	defer store.Close()
	storetest.Exercise(t, store)
}
