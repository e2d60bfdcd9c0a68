package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
)

// RunAsWorkerBeforeGeneration2 runs the notification as a worker before
// generation 2 does, asking GetVersion how to start: Temporal's test
// environment records no build id, which Run takes for a later worker's.
func (w NotificationWorkflow) RunAsWorkerBeforeGeneration2(ctx workflow.Context) (contract.NotificationState, error) {
	return w.run(ctx, func(workflow.Context) bool { return false })
}
