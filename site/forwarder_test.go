package site

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/workflows"
)

// bufferNotifications commits n notifications to a fresh site store, with
// no forwarder running, and returns the store and their ids.
func bufferNotifications(t *testing.T, n int) (*sitestore.Store, []string) {
	t.Helper()
	c, err := Open(context.Background(), filepath.Join(t.TempDir(), "site.db"), Options{SiteID: "plant-1", Node: "node-a"})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	ids := make([]string, n)
	for i := range ids {
		ids[i], err = c.Notify(context.Background(), "ops", fmt.Sprintf("backlog %d", i), "body")
		require.NoError(t, err)
	}
	return c.store, ids
}

func testForwarder(store *sitestore.Store, tc client.Client, t *testing.T) *Forwarder {
	return NewForwarder(store, nil, tc, ForwarderOptions{
		Interval: time.Minute, Batch: 50, Parallelism: 8, PollInterval: time.Second, CallTimeout: 2 * time.Second,
	}, zaptest.NewLogger(t))
}

// One sweep hands off a backlog many pages long, each row to its own
// workflow, and deletes the acknowledged rows in batches: far fewer
// commits than rows.
func TestSweepDrainsABacklogOfManyPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	srv, err := devserver.Start(ctx, devserver.Options{Address: addr, Namespace: "default"})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Stop() })
	store, ids := bufferNotifications(t, 400)

	commitsBefore := store.Commits()
	unreachable, err := testForwarder(store, srv.Client(), t).Sweep(ctx)
	require.NoError(t, err)
	require.False(t, unreachable)

	depth, err := store.Depth(ctx)
	require.NoError(t, err)
	require.Zero(t, depth, "one sweep drains all 8 pages")
	commits := store.Commits() - commitsBefore
	t.Logf("400 acknowledged rows settled in %d commits", commits)
	require.Less(t, commits, int64(400/4), "acknowledged rows are deleted in batches")
	for _, id := range []string{ids[0], ids[len(ids)-1]} {
		_, err := srv.Client().DescribeWorkflowExecution(ctx, workflows.NotificationWorkflowID(id), "")
		require.NoError(t, err, "workflow of %s started", id)
	}
}

// With central unreachable, a sweep stops at the first timeout instead of
// waiting one out per row: the rows in flight are rescheduled a forward
// interval on, the rest stay due, nothing is deleted.
func TestSweepStopsAtTheFirstUnreachableFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tc, err := client.NewLazyClient(client.Options{HostPort: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	store, _ := bufferNotifications(t, 200)

	start := time.Now()
	unreachable, err := testForwarder(store, tc, t).Sweep(ctx)
	require.NoError(t, err)
	require.True(t, unreachable)
	require.Less(t, time.Since(start), 10*time.Second, "one call timeout, not one per row")

	depth, err := store.Depth(ctx)
	require.NoError(t, err)
	require.Equal(t, 200, depth, "nothing is lost")
	due, err := store.Due(ctx, time.Now(), 200)
	require.NoError(t, err)
	require.NotEmpty(t, due, "rows never sent stay due")
	require.Less(t, len(due), 200, "rows in flight wait a forward interval")
	for _, m := range due {
		require.Zero(t, m.RetryCount, "a row not sent is not counted as a failed attempt")
	}
}
