package activities

import (
	"context"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// MirrorActivities keep central's site_calls mirror and audit what each
// mirrored row shows, in the same transaction.
type MirrorActivities struct {
	Store *centralstore.Store
}

// MirrorSiteCalls upserts a telemetry batch with its audit events.
func (a *MirrorActivities) MirrorSiteCalls(ctx context.Context, rows []contract.TrackedOperation) (int, error) {
	return a.Store.UpsertSiteCallsAudited(ctx, rows, siteCallEvents)
}

// siteCallEvents is the audit rows of every row's change, stale ones
// included: event ids and the events a row carries are deterministic, so
// an event already stored is not stored again.
func siteCallEvents(rows []contract.TrackedOperation) []centralstore.AuditEvent {
	var events []centralstore.AuditEvent
	for _, r := range rows {
		events = append(events, audit.SiteCallRows(r)...)
	}
	return events
}

// ReadReconcileCursor is the site's reconciliation cursor.
func (a *MirrorActivities) ReadReconcileCursor(ctx context.Context, siteID string) (int64, error) {
	return a.Store.ReconcileCursor(ctx, siteID)
}

// ResetReconcileCursor starts the site's reconciliation over from change 0.
func (a *MirrorActivities) ResetReconcileCursor(ctx context.Context, siteID string) error {
	return a.Store.ResetReconcileCursor(ctx, siteID)
}

// MirrorReconciled upserts a reconciliation page and advances the cursor.
func (a *MirrorActivities) MirrorReconciled(ctx context.Context, in contract.MirrorReconciledInput) error {
	_, err := a.Store.MirrorReconciled(ctx, in.SiteID, in.Rows, in.Cursor, siteCallEvents(in.Rows)...)
	return err
}
