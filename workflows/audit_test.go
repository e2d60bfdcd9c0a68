package workflows_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/workflows"
)

// recorder keeps the audit events observed once stored.
type recorder struct {
	mu     sync.Mutex
	events []centralstore.AuditEvent
}

func (r *recorder) observe(events []centralstore.AuditEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, events...)
}

// A cached call's operator actions reach the audit log through a local
// activity on central, with who, why and the status they led to.
func TestCachedCallOperatorActionsAreAudited(t *testing.T) {
	t.Parallel()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetStartTime(callT0)
	env.RegisterWorkflowWithOptions(workflows.CachedCallWorkflow, workflow.RegisterOptions{Name: contract.WorkflowCachedCall})
	site := &onsite.SiteActivities{}
	env.RegisterActivity(site)
	env.SetActivityTaskQueue(contract.SiteTaskQueue(callSite), site.DeliverCachedCall, site.ResolveParkedCall)
	rec := &recorder{}
	store, err := centralstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "central.db"))
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	store.ObserveAudit(rec.observe)
	env.RegisterActivity(&activities.AuditActivities{Store: store})

	parked := callRow(contract.StatusParked, 2, "retries exhausted (2): HTTP 503")
	delivers := []contract.TrackedOperation{parked, parked}
	resolves := []contract.TrackedOperation{callRow(contract.StatusRetrying, 0, ""), callRow(contract.StatusDiscarded, 0, "")}
	env.OnActivity(siteActs.DeliverCachedCall, mock.Anything, mock.Anything).Return(
		func(context.Context, contract.DeliverCachedCallInput) (contract.TrackedOperation, error) {
			row := delivers[0]
			delivers = delivers[1:]
			return row, nil
		})
	env.OnActivity(siteActs.ResolveParkedCall, mock.Anything, mock.Anything).Return(
		func(context.Context, contract.ResolveParkedCallInput) (contract.TrackedOperation, error) {
			row := resolves[0]
			resolves = resolves[1:]
			return row, nil
		})
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(contract.SignalSubmit, callSubmission()) }, 0)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "erp is back"})
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(contract.SignalDiscard, contract.OperatorAction{Operator: "bo", Reason: "entered by hand"})
	}, 2*time.Hour)
	env.ExecuteWorkflow(contract.WorkflowCachedCall)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())

	require.Equal(t, []centralstore.AuditEvent{
		{EventID: "call/op-1/operator/1", OperationID: "op-1", Kind: contract.KindExternalCall, SiteID: callSite,
			Event: centralstore.AuditOperatorRetry, Status: contract.StatusRetrying, Operator: "ana", Reason: "erp is back",
			At: callT0.Add(time.Hour)},
		{EventID: "call/op-1/operator/2", OperationID: "op-1", Kind: contract.KindExternalCall, SiteID: callSite,
			Event: centralstore.AuditOperatorDiscard, Status: contract.StatusDiscarded, Operator: "bo", Reason: "entered by hand",
			At: callT0.Add(2 * time.Hour)},
	}, rec.events)
	stored, err := store.ListAuditEvents(context.Background(), "op-1")
	require.NoError(t, err)
	require.Len(t, stored, 2, "stored before they were observed")
}
