package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// OperatorActionAudit is an operator's retry or discard applied to a parked
// cached call, for central's audit log. Notifications carry theirs in
// NotificationUpdate instead.
type OperatorActionAudit struct {
	OperationID string `json:"operationId"`
	Kind        string `json:"kind"`
	SiteID      string `json:"siteId"`
	// Retry is true for a retry, false for a discard.
	Retry  bool           `json:"retry"`
	Action OperatorAction `json:"action"`
	// Seq numbers the run's operator actions from 1: it names the event.
	Seq int `json:"seq"`
	// Status is the operation's status after the action.
	Status Status `json:"status"`
	// At is when the workflow applied it (workflow time).
	At time.Time `json:"at"`
}

// ActivityAuditOperatorAction records an OperatorActionAudit; a local
// activity on the central worker.
const ActivityAuditOperatorAction = "AuditOperatorAction"

// changeAuditOperatorAction versions the local activity that audits a cached
// call's operator action: histories recorded before it replay without it.
const changeAuditOperatorAction = "audit-operator-action"

// auditOperatorAction records an operator action in the audit log. A failure
// is logged and ignored: auditing never changes an operation's outcome.
func auditOperatorAction(ctx workflow.Context, rec OperatorActionAudit) {
	if workflow.GetVersion(ctx, changeAuditOperatorAction, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	rec.At = workflow.Now(ctx)
	if err := workflow.ExecuteLocalActivity(storeCtx(ctx), ActivityAuditOperatorAction, rec).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("audit of operator action failed", "operation", rec.OperationID, "error", err)
	}
}
