package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
)

// LookupNotificationWorkflow answers a notification's status from its
// central row. The site asks it once the notification's own workflow is
// gone: Temporal keeps a closed workflow only for the namespace's retention
// (days), central keeps the row for central.retention.notifications (a year).
func LookupNotificationWorkflow(ctx workflow.Context, id string) (contract.NotificationState, error) {
	var state contract.NotificationState
	err := workflow.ExecuteLocalActivity(storeCtx(ctx), notificationActs.LookupNotification, id).Get(ctx, &state)
	return state, err
}
