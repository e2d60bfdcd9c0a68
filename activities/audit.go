package activities

import (
	"context"

	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/workflows"
)

// AuditRecorder takes audit events without blocking or failing;
// *audit.Writer in production. Activities record after their own store
// write succeeded, never inside it: auditing cannot change an outcome.
type AuditRecorder interface {
	Record(events ...centralstore.AuditEvent)
}

// record hands events to r; a nil r audits nothing.
func record(r AuditRecorder, events ...centralstore.AuditEvent) {
	if r != nil {
		r.Record(events...)
	}
}

// AuditActivities record what workflows see and no store shows: an
// operator's retry or discard of a parked cached call.
type AuditActivities struct {
	Audit AuditRecorder
}

// AuditOperatorAction records an operator action; it never fails.
func (a *AuditActivities) AuditOperatorAction(_ context.Context, in workflows.OperatorActionAudit) error {
	record(a.Audit, audit.OperatorAction(in))
	return nil
}
