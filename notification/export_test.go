package notification

import (
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
)

// AsGeneration runs the notification workflow's two types as a worker of
// generation g runs them: Temporal's test environment records no build id,
// which counts as generation 3.
func (w Workflow) AsGeneration(g int) (
	run func(workflow.Context) (contract.NotificationState, error),
	runStarted func(workflow.Context, contract.NotificationSubmission) (contract.NotificationState, error),
) {
	generation := func(workflow.Context) int { return g }
	run = func(ctx workflow.Context) (contract.NotificationState, error) { return w.run(ctx, generation) }
	runStarted = func(ctx workflow.Context, sub contract.NotificationSubmission) (contract.NotificationState, error) {
		return w.runStarted(ctx, sub, generation)
	}
	return run, runStarted
}
