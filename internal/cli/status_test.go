package cli

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/operator"
)

func TestStatusCommand(t *testing.T) {
	f := newFake()
	f.addCall("c1", "plant-1", "erp.createOrder", contract.StatusDelivered, 1)
	parked := f.addNotification("n1", "plant-2", "ops", contract.StatusParked, 2)
	parked.pending = nil
	retrying := f.addCall("c2", "plant-1", "erp.getOrder", contract.StatusRetrying, 3)
	retrying.pending = []*workflowpb.PendingActivityInfo{{
		ActivityType: &commonpb.ActivityType{Name: "DeliverCachedCall"}, State: enums.PENDING_ACTIVITY_STATE_SCHEDULED, Attempt: 2,
		LastFailure: nil,
	}}
	useFake(t, f)
	cfg := quietConfig(t)

	out, _, err := runWith(t, "", "status", "--config", cfg, "c1")
	require.NoError(t, err)
	for _, want := range []string{
		"Operation         c1",
		"ExternalCall (target erp.createOrder, site plant-1)",
		"Summary           Call erp.createOrder from plant-1",
		"Status            Delivered",
		"Retry count       3",
		"Accepted          2026-05-01T08:01:00Z",
		"Operator action   by ana: erp back",
		"workflow call/c1 (CachedCallWorkflow), Completed on task queue outpost-central; attempts run on outpost-site-plant-1",
		"Web UI            http://ui.example:8233/namespaces/default/workflows/call%2Fc1/run-call%2Fc1/history",
	} {
		require.Contains(t, out, want)
	}

	out, _, err = runWith(t, "", "status", "notification/n1", "--json", "--config", cfg)
	require.NoError(t, err)
	var story operator.Story
	require.NoError(t, json.Unmarshal([]byte(out), &story))
	require.Equal(t, contract.KindNotification, story.Kind)
	require.Equal(t, contract.StatusParked, story.Status)
	require.Equal(t, "plant-2", story.Site)
	require.Equal(t, "ops", story.Target)
	require.Equal(t, contract.CentralTaskQueue, story.AttemptsRunOn)
	require.Equal(t, "Running", story.Workflow.Status)
	require.NotNil(t, story.Notification)
	require.Equal(t, 2, story.RetryCount)

	out, _, err = runWith(t, "", "status", "c2", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "DeliverCachedCall attempt 2, scheduled")

	_, _, err = runWith(t, "", "status", "7f0e", "--config", cfg)
	var notAtCentral *operator.NotAtCentralError
	require.ErrorAs(t, err, &notAtCentral)
	require.ErrorContains(t, err, "central has no workflow for 7f0e: it may still be buffered on its site, or was answered at once by the site (cached calls), see GET /v1/operations/7f0e")
}

func TestStatusReportsDescribeErrors(t *testing.T) {
	f := &failingDescribe{fakeTemporal: newFake()}
	prev := dialOperator
	dialOperator = func(config.Temporal, *zap.Logger) (operator.Temporal, func(), error) { return f, func() {}, nil }
	t.Cleanup(func() { dialOperator = prev })
	_, _, err := runWith(t, "", "status", "c1", "--config", quietConfig(t))
	require.ErrorContains(t, err, "describe workflow notification/c1: permission denied")
	var notAtCentral *operator.NotAtCentralError
	require.False(t, errors.As(err, &notAtCentral))
}

type failingDescribe struct{ *fakeTemporal }

func (f *failingDescribe) DescribeWorkflowExecution(context.Context, string, string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	return nil, serviceerror.NewPermissionDenied("permission denied", "")
}

// A notification of a region that shares the namespace ran on its region's
// queue, so its attempts run there; one of a region that is a namespace of
// its own ran on outpost-central, and says so.
func TestStatusNamesTheRegionsQueue(t *testing.T) {
	f := newFake()
	shared := f.addNotification("n-eu", "plant-lyon", "ops", contract.StatusRetrying, 1)
	shared.info.TaskQueue = contract.Region{Name: "eu", OwnQueue: true}.TaskQueue()
	shared.info.SearchAttributes.IndexedFields["OutpostRegion"] = payload("eu")
	own := f.addNotification("n-us", "plant-ohio", "ops", contract.StatusRetrying, 2)
	own.info.SearchAttributes.IndexedFields["OutpostRegion"] = payload("us")
	useFake(t, f)
	cfg := quietConfig(t)

	out, _, err := runWith(t, "", "status", "--config", cfg, "notification/n-eu")
	require.NoError(t, err)
	require.Contains(t, out, "on task queue outpost-central-eu; attempts run on outpost-central-eu")

	out, _, err = runWith(t, "", "status", "--json", "--config", cfg, "notification/n-us")
	require.NoError(t, err)
	var story operator.Story
	require.NoError(t, json.Unmarshal([]byte(out), &story))
	require.Equal(t, contract.CentralTaskQueue, story.AttemptsRunOn)
}
