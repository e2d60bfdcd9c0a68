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

// EventObserver is told of audit events once they are stored with their
// change (central's metrics count them). It must not block.
type EventObserver func(events ...centralstore.AuditEvent)

// observe tells o of events; a nil o observes nothing.
func (o EventObserver) observe(events ...centralstore.AuditEvent) {
	if o != nil {
		o(events...)
	}
}

// AuditActivities record what workflows see and no store shows: an
// operator's retry or discard of a parked cached call.
type AuditActivities struct {
	Store   *centralstore.Store
	Observe EventObserver
}

// AuditOperatorAction stores an operator action's event.
func (a *AuditActivities) AuditOperatorAction(ctx context.Context, in contract.OperatorActionAudit) error {
	e := audit.OperatorAction(in)
	if _, err := a.Store.InsertAuditEvents(ctx, []centralstore.AuditEvent{e}); err != nil {
		return err
	}
	a.Observe.observe(e)
	return nil
}
