// Package activities holds the I/O behind Outpost's workflows besides a
// notification's delivery (package notification): audit records, the
// mirror of site tracking rows, settling terminated workflows and the purge.
package activities

import (
	"context"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// Audit events are stored in the transaction of the state change they
// describe (the store methods take them), so a change is never stored
// without its events nor an event without its change, crash or not.

// AuditActivities record what workflows see and no store shows: an
// operator's retry or discard of a parked cached call.
type AuditActivities struct {
	Store *centralstore.Store
}

// AuditOperatorAction stores an operator action's event.
func (a *AuditActivities) AuditOperatorAction(ctx context.Context, in contract.OperatorActionAudit) error {
	_, err := a.Store.InsertAuditEvents(ctx, []centralstore.AuditEvent{audit.OperatorAction(in)})
	return err
}
