package sitedaemon

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/workers"
)

// The generation of central's workers is the lowest any poller names; an
// empty list (central down or not yet polling) or a worker without this
// code's build id gives 0. Notifications are started with their input from
// generation 3, cached calls from 4; telemetry is signalled from 5.
func TestLowestGeneration(t *testing.T) {
	poller := func(buildID string) *taskqueuepb.PollerInfo {
		return &taskqueuepb.PollerInfo{WorkerVersionCapabilities: &commonpb.WorkerVersionCapabilities{BuildId: buildID}}
	}
	for _, tc := range []struct {
		name          string
		pollers       []*taskqueuepb.PollerInfo
		want          int
		notifications string
		calls         string
		telemetry     string
	}{
		{"no worker", nil, 0, contract.WorkflowNotification, contract.WorkflowCachedCall, contract.WorkflowIngestTelemetry},
		{"generation 3", []*taskqueuepb.PollerInfo{poller("outpost-workflows-3")}, 3, contract.WorkflowNotificationStarted, contract.WorkflowCachedCall, contract.WorkflowIngestTelemetry},
		{"generations 3 and 4", []*taskqueuepb.PollerInfo{poller("outpost-workflows-4"), poller("outpost-workflows-3")}, 3,
			contract.WorkflowNotificationStarted, contract.WorkflowCachedCall, contract.WorkflowIngestTelemetry},
		{"generation 4", []*taskqueuepb.PollerInfo{poller("outpost-workflows-4"), poller("outpost-workflows-4")}, 4,
			contract.WorkflowNotificationStarted, contract.WorkflowCachedCallStarted, contract.WorkflowIngestTelemetry},
		{"generation 5", []*taskqueuepb.PollerInfo{poller("outpost-workflows-5"), poller("outpost-workflows-5")}, 5,
			contract.WorkflowNotificationStarted, contract.WorkflowCachedCallStarted, contract.WorkflowTelemetryIngest},
		{"generations 4 and 5", []*taskqueuepb.PollerInfo{poller("outpost-workflows-5"), poller("outpost-workflows-4")}, 4,
			contract.WorkflowNotificationStarted, contract.WorkflowCachedCallStarted, contract.WorkflowIngestTelemetry},
		{"one of generation 2", []*taskqueuepb.PollerInfo{poller("outpost-workflows-4"), poller("outpost-workflows-2")}, 2,
			contract.WorkflowNotification, contract.WorkflowCachedCall, contract.WorkflowIngestTelemetry},
		{"one before generation 2", []*taskqueuepb.PollerInfo{poller("outpost-workflows-4"), poller("aa47428fb6ac0ff8a7ae231f5b24c072")}, 0,
			contract.WorkflowNotification, contract.WorkflowCachedCall, contract.WorkflowIngestTelemetry},
		{"one without a build id", []*taskqueuepb.PollerInfo{poller("outpost-workflows-4"), {Identity: "old"}}, 0,
			contract.WorkflowNotification, contract.WorkflowCachedCall, contract.WorkflowIngestTelemetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lowestGeneration(tc.pollers)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.notifications, notificationWorkflowType(got))
			require.Equal(t, tc.calls, callWorkflowType(got))
			require.Equal(t, tc.telemetry, telemetryWorkflowType(got))
		})
	}
}

// On a real server the forwarder signals a notification while no central
// worker polls, starts it with its input once only workers of generation 3
// poll, and signals again when a worker of generation 2 polls beside them.
func TestNotificationHandOffFollowsCentralGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := startDevServer(t)
	tc := srv.Client()
	store, ids := bufferNotifications(t, 3)

	handOff := func(i int) string {
		t.Helper()
		m, err := store.Get(ctx, ids[i])
		require.NoError(t, err)
		// A fresh forwarder asks afresh: startCheck's answers last a while.
		require.NoError(t, testForwarder(store, tc, t, patientCall).handOff(ctx, m))
		var sub contract.NotificationSubmission
		require.NoError(t, json.Unmarshal(m.Payload, &sub))
		desc, err := tc.DescribeWorkflowExecution(ctx, contract.NotificationWorkflowID(sub.NotificationID), "")
		require.NoError(t, err)
		return desc.GetWorkflowExecutionInfo().GetType().GetName()
	}

	require.Equal(t, contract.WorkflowNotification, handOff(0), "no central worker: signalled")
	pollCentral(t, tc, contract.CentralBuildIDPrefix+"3")
	require.Equal(t, contract.WorkflowNotificationStarted, handOff(1), "only generation 3 polls: started with its input")
	pollCentral(t, tc, contract.CentralBuildIDPrefix+"2")
	require.Equal(t, contract.WorkflowNotification, handOff(2), "a generation 2 worker polls too: signalled")
}

// pollCentral runs a worker of buildID on central's task queue (it runs no
// notification: its workflow type is another) until the server lists it.
func pollCentral(t *testing.T, tc client.Client, buildID string) {
	t.Helper()
	w := worker.New(tc, contract.CentralTaskQueue, worker.Options{BuildID: buildID, Identity: "central worker " + buildID})
	w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: "Idle"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, workers.AwaitListed(ctx, tc, buildID))
}

// describeOnly answers DescribeTaskQueue as told and counts the questions;
// nothing else of the client is used by startCheck.
type describeOnly struct {
	client.Client
	resp  *workflowservice.DescribeTaskQueueResponse
	err   error
	asked int
	queue string
}

func (d *describeOnly) DescribeTaskQueue(_ context.Context, queue string, _ enums.TaskQueueType) (*workflowservice.DescribeTaskQueueResponse, error) {
	d.asked++
	d.queue = queue
	return d.resp, d.err
}

// A site in a region asks about its region's workers: the generation of
// another region's central says nothing of how its own takes a hand-off.
func TestStartCheckAsksTheRegionsQueue(t *testing.T) {
	t.Parallel()
	tc := &describeOnly{err: errors.New("no server")}
	newStartCheck(tc, contract.Region{Name: "eu", OwnQueue: true}.TaskQueue(), zap.NewNop()).centralGeneration(context.Background())
	require.Equal(t, "outpost-central-eu", tc.queue)
}

// An answer stands 10 s below the latest generation (central may be
// upgrading) and a minute at it; credentials that may not list the workers leave the
// site signalling, said once as a warning however often it asks again.
func TestStartCheckAnswersStandAWhile(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	core, logs := observer.New(zap.InfoLevel)
	tc := &describeOnly{err: serviceerror.NewPermissionDenied("describe task queue not allowed", "")}
	c := newStartCheck(tc, contract.CentralTaskQueue, zap.New(core))
	c.now = func() time.Time { return now }

	require.False(t, c.startsNotifications(ctx))
	require.False(t, c.startsNotifications(ctx))
	require.Equal(t, 1, tc.asked, "a no stands 10 s")
	now = now.Add(startCheckNoFor)
	require.False(t, c.startsNotifications(ctx))
	require.Equal(t, 2, tc.asked)
	require.Equal(t, 1, logs.FilterLevelExact(zap.WarnLevel).Len(), "the missing permission is said once")

	tc.err = nil
	answer := func(buildID string) {
		tc.resp = &workflowservice.DescribeTaskQueueResponse{Pollers: []*taskqueuepb.PollerInfo{
			{WorkerVersionCapabilities: &commonpb.WorkerVersionCapabilities{BuildId: buildID}},
		}}
	}
	answer(contract.CentralBuildIDPrefix + "3")
	now = now.Add(startCheckNoFor)
	require.True(t, c.startsNotifications(ctx))
	require.False(t, c.startsCalls(ctx))
	require.Equal(t, 3, tc.asked, "generation 3 stands 10 s")
	require.Equal(t, 1, logs.FilterMessageSnippet("handed off as "+contract.WorkflowNotificationStarted+", cached calls as "+
		contract.WorkflowCachedCall).Len())

	answer(contract.CentralBuildIDPrefix + "4")
	now = now.Add(startCheckNoFor)
	require.True(t, c.startsCalls(ctx))
	require.False(t, c.sendsToTelemetryIngest(ctx))
	require.Equal(t, 4, tc.asked, "generation 4 stands 10 s")
	require.Equal(t, 1, logs.FilterMessageSnippet("cached calls as "+contract.WorkflowCachedCallStarted).Len())

	answer(contract.CentralBuildIDPrefix + "5")
	now = now.Add(startCheckNoFor)
	require.True(t, c.sendsToTelemetryIngest(ctx))
	require.False(t, c.compressesTelemetry(ctx))
	require.Equal(t, 5, tc.asked, "generation 5 stands 10 s")
	require.Equal(t, 1, logs.FilterMessageSnippet("telemetry to "+contract.WorkflowTelemetryIngest).Len())

	answer(contract.CentralBuildIDPrefix + "6")
	now = now.Add(startCheckNoFor)
	require.True(t, c.compressesTelemetry(ctx))
	now = now.Add(startCheckYesFor - time.Second)
	require.True(t, c.startsNotifications(ctx))
	require.True(t, c.startsCalls(ctx))
	require.True(t, c.sendsToTelemetryIngest(ctx))
	require.True(t, c.compressesTelemetry(ctx))
	require.Equal(t, 6, tc.asked, "generation 6 stands a minute")
	require.Equal(t, 1, logs.FilterMessageSnippet("telemetry to "+contract.WorkflowTelemetryIngest+" (compressed)").Len())
}
