package cluster

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/pgserver"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// startForTestDeadline bounds the start on a loaded machine; the first run
// on a machine also builds the pinned server (a few minutes).
const startForTestDeadline = 15 * time.Minute

// StartForTest starts a cluster in t.TempDir() with namespace and stops it when the test ends; the servers'
// logs are printed when the test fails. Like the dev server tests it skips
// under -short; without PostgreSQL it fails (CI installs it, .ci/run).
func StartForTest(t testing.TB, namespace string, logger *zap.Logger) *Cluster {
	t.Helper()
	testutil.SkipIfShort(t)
	if _, err := pgserver.BinDir(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startForTestDeadline)
	defer cancel()
	var log testutil.SyncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("temporal cluster and postgresql log (its end):\n%s", lastBytes(log.String(), 20000))
		}
	})
	c, err := Start(ctx, Options{Dir: t.TempDir(), Namespace: namespace, Log: &log, Logger: logger})
	if err != nil {
		t.Fatalf("start the temporal cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	t.Logf("temporal cluster of %d nodes started in %s: frontends %v", Nodes, c.StartupTime.Round(time.Millisecond), c.Frontends())
	return c
}

// lastBytes is the end of s, at most n bytes of it.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
