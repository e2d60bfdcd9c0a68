package workflows

import (
	"fmt"
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

// changeAuditOperatorAction versions the audit of a cached call's operator
// action: histories recorded before version 1 replay without it; version 1
// gave up after 30 s; version 2 retries until the store takes it.
const changeAuditOperatorAction = "audit-operator-action"

// auditOperatorAction records an operator action in the audit log, retrying
// until the central store takes it: an audit event is never lost, and the
// operation's outcome (already on the site) does not wait on it.
func auditOperatorAction(ctx workflow.Context, rec OperatorActionAudit) error {
	v := workflow.GetVersion(ctx, changeAuditOperatorAction, workflow.DefaultVersion, 2)
	if v == workflow.DefaultVersion {
		return nil
	}
	rec.At = workflow.Now(ctx)
	if v == 1 {
		if err := workflow.ExecuteLocalActivity(storeCtx(ctx), ActivityAuditOperatorAction, rec).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("audit of operator action failed", "operation", rec.OperationID, "error", err)
		}
		return nil
	}
	if err := storeWrite(ctx, ActivityAuditOperatorAction, rec, nil); err != nil {
		return fmt.Errorf("audit operator action on %s: %w", rec.OperationID, err)
	}
	return nil
}
