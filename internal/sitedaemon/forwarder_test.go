package sitedaemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/workers"
)

// bufferNotifications commits n notifications to a fresh site store, with
// no forwarder running, and returns the store and their ids.
func bufferNotifications(t *testing.T, n int) (*sitestore.Store, []string) {
	t.Helper()
	c, store := openClient(t, site.Options{SiteID: "plant-1", Node: "node-a"})
	ids := make([]string, n)
	for i := range ids {
		var err error
		ids[i], err = c.Notify(context.Background(), "ops", fmt.Sprintf("backlog %d", i), "body")
		require.NoError(t, err)
	}
	return store, ids
}

// startDevServer starts a Temporal dev server (no workers) for this test.
func startDevServer(t *testing.T) *testsuite.DevServer {
	t.Helper()
	return startDevServerWith(t, devserver.Options{})
}

// startDevServerWith starts a Temporal dev server (no workers) with opts,
// at a free address, for this test.
func startDevServerWith(t *testing.T, opts devserver.Options) *testsuite.DevServer {
	t.Helper()
	testutil.SkipIfShort(t)
	opts.Address, opts.Namespace = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "default"
	srv, err := devserver.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Stop() })
	return srv
}

// testForwarder hands off 50 rows a page, 8 at a time. callTimeout is
// what a hand-off may take before central counts as unreachable: tests
// that are not about that pass patientCall, which a dev server on a loaded
// CI machine still meets (a 3 MB submit there can take over 2 s).
func testForwarder(store *sitestore.Store, tc client.Client, t *testing.T, callTimeout time.Duration) *Forwarder {
	return NewForwarder(store, targets.New(nil, nil), tc, ForwarderOptions{
		Interval: time.Minute, Batch: 50, Parallelism: 8, PollInterval: time.Second, CallTimeout: callTimeout,
	}, zaptest.NewLogger(t))
}

const patientCall = 30 * time.Second

// Acknowledged rows are settled in batches of up to a page: 400 acks that
// are all there at once take 8 commits, not 400. (In a sweep the batches
// are what arrives within settleWait, so their size depends on how fast
// central answers.)
func TestAcksAreSettledInBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, _ := bufferNotifications(t, 400)
	due, err := store.Due(ctx, time.Now(), 400)
	require.NoError(t, err)
	require.Len(t, due, 400)
	acks := make(chan sitestore.Message, len(due))
	for _, m := range due {
		acks <- m
	}
	close(acks)

	before := store.Commits()
	require.NoError(t, testForwarder(store, nil, t, patientCall).settleAcks(ctx, acks))
	require.Equal(t, int64(400/50), store.Commits()-before, "one commit per 50 acks")
	depth, err := store.Depth(ctx)
	require.NoError(t, err)
	require.Zero(t, depth, "every acknowledged notification is deleted")
}

// One sweep hands off a backlog many pages long, each row to its own
// workflow, and deletes the acknowledged rows.
func TestSweepDrainsABacklogOfManyPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startDevServer(t)
	store, ids := bufferNotifications(t, 400)

	commitsBefore := store.Commits()
	unreachable, err := testForwarder(store, srv.Client(), t, patientCall).Sweep(ctx)
	require.NoError(t, err)
	require.False(t, unreachable)

	depth, err := store.Depth(ctx)
	require.NoError(t, err)
	require.Zero(t, depth, "one sweep drains all 8 pages")
	t.Logf("400 acknowledged rows settled in %d commits", store.Commits()-commitsBefore)
	for _, id := range []string{ids[0], ids[len(ids)-1]} {
		_, err := srv.Client().DescribeWorkflowExecution(ctx, contract.NotificationWorkflowID(id), "")
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
	unreachable, err := testForwarder(store, tc, t, 2*time.Second).Sweep(ctx)
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

// A buffered notification whose workflow is already closed (central
// finished it and the site's delete of the row was lost, or an operator
// terminated it) is answered "already started": one sweep counts that as
// the ack and deletes the row, and the closed run is neither restarted nor
// signalled.
func TestSweepAcksANotificationWhoseWorkflowIsClosed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startDevServer(t)
	tc := srv.Client()
	store, ids := bufferNotifications(t, 1)
	m, err := store.Get(ctx, ids[0])
	require.NoError(t, err)
	var sub contract.NotificationSubmission
	require.NoError(t, json.Unmarshal(m.Payload, &sub))
	id := contract.NotificationWorkflowID(sub.NotificationID)
	run, err := tc.SignalWithStartWorkflow(ctx, id, contract.SignalSubmit, sub, NotificationStartOptions(sub, false), contract.WorkflowNotification)
	require.NoError(t, err)
	require.NoError(t, tc.TerminateWorkflow(ctx, id, run.GetRunID(), "closed before the site's hand-off"))
	closed, err := tc.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, closed.WorkflowExecutionInfo.Status)

	fwd := testForwarder(store, tc, t, patientCall)
	unreachable, err := fwd.Sweep(ctx)
	require.NoError(t, err)
	require.False(t, unreachable)
	_, err = store.Get(ctx, ids[0])
	require.ErrorIs(t, err, sitestore.ErrNotFound, "the already-started answer is the ack: the row is deleted")
	require.Equal(t, 1.0, fwd.handoffCount(t, handoffAcked))
	require.Equal(t, 0.0, fwd.handoffCount(t, handoffFailed))

	desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	require.Equal(t, run.GetRunID(), desc.WorkflowExecutionInfo.Execution.RunId, "no new run")
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, desc.WorkflowExecutionInfo.Status)
	require.Equal(t, closed.WorkflowExecutionInfo.HistoryLength, desc.WorkflowExecutionInfo.HistoryLength, "the closed run is left as it was")
}

// handoffCount reads outpost_site_handoffs_total for notifications.
func (f *Forwarder) handoffCount(t *testing.T, outcome string) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, f.handoffs.WithLabelValues(contract.KindNotification, outcome).Write(&m))
	return m.GetCounter().GetValue()
}

// A buffered notification central refuses for good (here over Temporal's
// payload limit, as a site before the field bounds could buffer) is parked
// on the site and reported, not handed off again at every sweep; the rest
// of the backlog goes on.
func TestSweepParksWhatCentralRefusesForGood(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startDevServer(t)
	c, store := openClient(t, site.Options{SiteID: "plant-1", Node: "node-a"})
	ok, err := c.Notify(ctx, "ops", "fine", "")
	require.NoError(t, err)
	poison, err := site.NewID()
	require.NoError(t, err)
	payload, err := json.Marshal(contract.NotificationSubmission{NotificationID: poison, ListName: "ops", Subject: "huge",
		SourceSiteID: "plant-1", SourceInstanceID: strings.Repeat("x", 3<<20), SiteEnqueuedAt: time.Now().UTC()})
	require.NoError(t, err)
	_, err = store.Enqueue(ctx, sitestore.NewMessage{ID: poison, Category: contract.KindNotification, Target: "ops",
		Payload: payload, Provenance: sitestore.Provenance{SiteID: "plant-1", Node: "node-a"}})
	require.NoError(t, err)

	fwd := testForwarder(store, srv.Client(), t, patientCall)
	for range 2 {
		_, err = fwd.Sweep(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 1.0, fwd.handoffCount(t, handoffRefused), "refused once, then left alone")
	require.Equal(t, 1.0, fwd.handoffCount(t, handoffAcked))
	_, err = store.Get(ctx, ok)
	require.ErrorIs(t, err, sitestore.ErrNotFound, "the rest of the backlog went")

	st, err := c.Status(ctx, poison)
	require.NoError(t, err)
	require.Equal(t, contract.StatusParked, st.Status)
	require.Contains(t, st.LastError, "central refused it for good")
	require.Nil(t, st.NextAttemptAt)
}

// A site started before any central worker on a fresh namespace: Temporal
// refuses the hand-off ("no mapping defined for search attribute"), which
// is not the notification's fault. The row is retried at the forward
// interval, never parked; /readyz's reason and the waiting metric say what
// is wrong and what cures it; once central registers the attributes the
// next pass hands it off and the reason clears.
func TestSweepRetriesWhatCentralAcceptsOnceSetUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startDevServer(t)
	const namespace = "fresh"
	_, err := srv.Client().WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: namespace, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour),
	})
	require.NoError(t, err)
	tc, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Namespace: namespace})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	store, ids := bufferNotifications(t, 1)
	fwd := testForwarder(store, tc, t, patientCall)
	fwd.opts.Interval = 100 * time.Millisecond

	// The namespace may be unknown to the frontend for a moment (also a
	// wait for central); then the missing search attributes answer.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		_, err := fwd.Sweep(ctx)
		require.NoError(t, err)
		if strings.Contains(fwd.WaitingForCentral(), "search attribute") {
			return true
		}
		return false
	}, func() string { return "a refusal for the missing search attributes; last: " + fwd.WaitingForCentral() })
	require.Contains(t, fwd.WaitingForCentral(), "start `outpost central` once")
	require.Zero(t, fwd.handoffCount(t, handoffRefused), "nothing is parked")
	require.GreaterOrEqual(t, fwd.handoffCount(t, handoffWaiting), 1.0)
	row, err := store.Get(ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, contract.StatusRetrying, row.Status, "retried at the forward interval, not parked")
	require.Contains(t, row.LastError, "no mapping defined for search attribute")

	require.NoError(t, workers.EnsureSearchAttributes(ctx, tc, namespace, zaptest.NewLogger(t)))
	testutil.WaitFor(t, 30*time.Second, func() bool {
		time.Sleep(fwd.opts.Interval)
		_, err := fwd.Sweep(ctx)
		require.NoError(t, err)
		_, err = store.Get(ctx, ids[0])
		return errors.Is(err, sitestore.ErrNotFound)
	}, func() string {
		return "the hand-off once the search attributes exist; waiting: " + fwd.WaitingForCentral()
	})
	require.Empty(t, fwd.WaitingForCentral(), "a hand-off went through: nothing waits for central")
	require.Equal(t, 1.0, fwd.handoffCount(t, handoffAcked))
}

// Only a refusal about the item itself parks it; one a later central cures
// is retried. The messages are Temporal's own.
func TestRefusalsAreToldApart(t *testing.T) {
	t.Parallel()
	item := []error{
		serviceerror.NewInvalidArgument("Blob data size exceeds limit."),
		serviceerror.NewInvalidArgument("WorkflowId length exceeds limit."),
		serviceerror.NewInvalidArgument("Memo size exceeds limit."),
		fmt.Errorf("decode: %w", errUnreadable),
	}
	for _, err := range item {
		require.True(t, isRefused(err), "%v is about the item", err)
		require.False(t, centralNotReady(err), "%v", err)
	}
	curable := []error{
		serviceerror.NewInvalidArgument("no mapping defined for search attribute OutpostKind for index temporal_visibility_v1"),
		serviceerror.NewNamespaceNotFound("fresh"),
		serviceerror.NewPermissionDenied("Request unauthorized.", ""),
		serviceerror.NewFailedPrecondition("Namespace is not active."),
	}
	for _, err := range curable {
		require.False(t, isRefused(err), "%v is not about the item", err)
		require.True(t, centralNotReady(err), "%v", err)
	}
}
