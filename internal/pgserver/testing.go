package pgserver

import (
	"context"
	"testing"
	"time"

	"github.com/outpost-dev/outpost/internal/testutil"
)

// startForTestDeadline bounds initdb plus the first start on a loaded machine.
const startForTestDeadline = 3 * time.Minute

// StartForTest starts a throwaway PostgreSQL in t.TempDir() on a port no
// other test process can take, and stops it when the test ends; the server's
// log is printed when the test fails. Without PostgreSQL installed it skips
// under -short and fails otherwise: CI installs it (.ci/run).
func StartForTest(t testing.TB) *Server {
	t.Helper()
	if _, err := BinDir(); err != nil {
		if testing.Short() {
			t.Skipf("skipped under -short: %v", err)
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startForTestDeadline)
	defer cancel()
	var log testutil.SyncBuffer
	srv, err := Start(ctx, Options{Dir: t.TempDir(), Port: testutil.FreePort(t), Log: &log})
	if err != nil {
		t.Fatalf("start postgresql: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop postgresql: %v", err)
		}
		if t.Failed() {
			t.Logf("postgresql log:\n%s", log.String())
		}
	})
	return srv
}
