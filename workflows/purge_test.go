package workflows_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/workflows"
)

func newPurgeEnv() *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(workflows.PurgeWorkflow, workflow.RegisterOptions{Name: contract.WorkflowPurge})
	env.RegisterActivity(&activities.PurgeActivities{})
	return env
}

// The workflow calls the purge activity again while it reports more rows
// due, and adds up what each call deleted.
func TestPurgeWorkflowRunsUntilNothingIsLeft(t *testing.T) {
	t.Parallel()
	env := newPurgeEnv()
	answers := []contract.PurgeResult{
		{Notifications: 1000, More: true},
		{Notifications: 200, SiteCalls: 700, AuditLog: 100, More: true},
		{AuditLog: 40},
	}
	calls := 0
	env.OnActivity(purgeActs.PurgeCentralStore, mock.Anything).Return(
		func(context.Context) (contract.PurgeResult, error) {
			calls++
			return answers[calls-1], nil
		})
	env.ExecuteWorkflow(contract.WorkflowPurge)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var res contract.PurgeResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.Equal(t, contract.PurgeResult{Notifications: 1200, SiteCalls: 700, AuditLog: 140}, res)
	require.Equal(t, 3, calls)
}

// A backlog larger than one run's cap is left to the next run, and said so.
func TestPurgeWorkflowStopsAtItsCap(t *testing.T) {
	t.Parallel()
	env := newPurgeEnv()
	calls := 0
	env.OnActivity(purgeActs.PurgeCentralStore, mock.Anything).Return(
		func(context.Context) (contract.PurgeResult, error) {
			calls++
			return contract.PurgeResult{SiteCalls: 10, More: true}, nil
		})
	env.ExecuteWorkflow(contract.WorkflowPurge)
	require.NoError(t, env.GetWorkflowError())
	var res contract.PurgeResult
	require.NoError(t, env.GetWorkflowResult(&res))
	require.True(t, res.More)
	require.Equal(t, 50, calls)
	require.Equal(t, 500, res.SiteCalls)
}

// A failing store fails the run after the activity's retries; the next
// scheduled run starts over.
func TestPurgeWorkflowFailsWhenTheStoreFails(t *testing.T) {
	t.Parallel()
	env := newPurgeEnv()
	env.OnActivity(purgeActs.PurgeCentralStore, mock.Anything).Return(
		contract.PurgeResult{}, temporal.NewApplicationError("database is locked", "Store"))
	env.ExecuteWorkflow(contract.WorkflowPurge)
	require.True(t, env.IsWorkflowCompleted())
	require.ErrorContains(t, env.GetWorkflowError(), "database is locked")
	env.AssertNumberOfCalls(t, nameOf(purgeActs.PurgeCentralStore), 5)
}
