package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// A central worker runs a workflow of its own region, or one that names
// none (started before regions, or by a site without one), and refuses one
// of another region before any of its code runs, naming both regions.
func TestRegionGuardRunsOnlyItsRegionsWork(t *testing.T) {
	for _, tc := range []struct {
		name, worker, workflow string
		runs                   bool
	}{
		{"its own region", "eu", "eu", true},
		{"no region on the workflow", "eu", "", true},
		{"no region anywhere", "", "", true},
		{"another region", "eu", "us", false},
		{"a region to a worker of none", "", "us", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var suite testsuite.WorkflowTestSuite
			env := suite.NewTestWorkflowEnvironment()
			env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{RegionGuard(tc.worker)}})
			if tc.workflow != "" {
				env.SetTypedSearchAttributesOnStart(temporal.NewSearchAttributes(temporalcontract.AttrRegion.ValueSet(tc.workflow)))
			}
			ran := false
			env.RegisterWorkflowWithOptions(func(workflow.Context) error { ran = true; return nil }, workflow.RegisterOptions{Name: "Work"})
			env.ExecuteWorkflow("Work")
			require.True(t, env.IsWorkflowCompleted())
			require.Equal(t, tc.runs, ran)
			if tc.runs {
				require.NoError(t, env.GetWorkflowError())
				return
			}
			var panicked *temporal.PanicError
			require.ErrorAs(t, env.GetWorkflowError(), &panicked, "a panic fails the workflow task: Temporal retries it, the workflow stays open")
			require.Contains(t, panicked.Error(), `belongs to region "us"`)
			require.Contains(t, panicked.Error(), "this central worker serves "+contract.RegionWords(tc.worker))
		})
	}
}
