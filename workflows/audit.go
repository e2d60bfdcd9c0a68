package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/workflows/operation"
)

// changeAuditOperatorAction versions the audit of a cached call's operator
// action: histories recorded before version 1 replay without it; version 1
// gave up after 30 s; version 2 retries until the store takes it.
const changeAuditOperatorAction = "audit-operator-action"

// auditOperatorAction records an operator action in the audit log, retrying
// until the central store takes it: an audit event is never lost, and the
// operation's outcome (already on the site) does not wait on it.
func auditOperatorAction(ctx workflow.Context, rec contract.OperatorActionAudit) error {
	v := workflow.GetVersion(ctx, changeAuditOperatorAction, workflow.DefaultVersion, 2)
	if v == workflow.DefaultVersion {
		return nil
	}
	rec.At = workflow.Now(ctx)
	if v == 1 {
		if err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), auditActs.AuditOperatorAction, rec).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("audit of operator action failed", "operation", rec.OperationID, "error", err)
		}
		return nil
	}
	if err := operation.StoreWrite(ctx, auditActs.AuditOperatorAction, rec, nil); err != nil {
		return fmt.Errorf("audit operator action on %s: %w", rec.OperationID, err)
	}
	return nil
}
