package notification

import (
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/workflows/operation"
)

// LookupWorkflow answers a notification's status from its central row
// (contract.WorkflowLookupNotification). The site asks it once the
// notification's own workflow is gone: Temporal keeps a closed workflow
// only for the namespace's retention (days), central keeps the row for
// central.retention.notifications (a year).
func LookupWorkflow(ctx workflow.Context, id string) (contract.NotificationState, error) {
	var state contract.NotificationState
	err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), acts.LookupNotification, id).Get(ctx, &state)
	return state, err
}
