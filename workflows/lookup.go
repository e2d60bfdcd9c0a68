package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// ActivityLookupNotification reads a notification's central row.
const ActivityLookupNotification = "LookupNotification"

// ErrTypeNotFound fails a lookup of an id central has no row for.
const ErrTypeNotFound = "NotFound"

// LookupNotificationWorkflow answers a notification's status from its
// central row. The site asks it once the notification's own workflow is
// gone: Temporal keeps a closed workflow only for the namespace's retention
// (days), central keeps the row for central.retention.notifications (a year).
func LookupNotificationWorkflow(ctx workflow.Context, id string) (NotificationState, error) {
	var state NotificationState
	err := workflow.ExecuteLocalActivity(storeCtx(ctx), ActivityLookupNotification, id).Get(ctx, &state)
	return state, err
}

// LookupNotificationWorkflowID names the lookup of notification id:
// concurrent lookups of one id share a run.
func LookupNotificationWorkflowID(id string) string { return "lookup/" + NotificationWorkflowID(id) }
