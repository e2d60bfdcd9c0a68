package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// MirrorActivities keep central's site_calls mirror and audit what each
// mirrored row shows, in the same transaction.
type MirrorActivities struct {
	Store *centralstore.Store
	// Telemetry bounds the telemetry batches this process decodes and
	// writes at once (MirrorTelemetry); NewMirrorActivities sets it.
	Telemetry *TelemetryBudget
}

// NewMirrorActivities are the mirror activities of a worker process on
// store, with a telemetry budget of TelemetryBudgetBytes.
func NewMirrorActivities(store *centralstore.Store) *MirrorActivities {
	return &MirrorActivities{Store: store, Telemetry: NewTelemetryBudget(TelemetryBudgetBytes)}
}

// MirrorSiteCalls upserts a telemetry batch with its audit events.
func (a *MirrorActivities) MirrorSiteCalls(ctx context.Context, rows []contract.TrackedOperation) (int, error) {
	return a.Store.UpsertSiteCallsAudited(ctx, rows, audit.SiteCallChanges)
}

// MirrorTelemetry decodes the telemetry batches a TelemetryIngestWorkflow
// took, still encoded as the sites signalled them, and upserts their rows
// with their audit events in one write, within the process's telemetry
// budget. It returns each site's last change written.
func (a *MirrorActivities) MirrorTelemetry(ctx context.Context, batches []converter.RawValue) ([]contract.TelemetryWritten, error) {
	release, err := a.Telemetry.hold(ctx, jsonSize(batches...))
	if err != nil {
		return nil, err
	}
	defer release()
	rows, written, err := decodeTelemetry(batches)
	if err != nil {
		return nil, err
	}
	if _, err := a.Store.UpsertSiteCallsAudited(ctx, rows, audit.SiteCallChanges); err != nil {
		return nil, fmt.Errorf("mirror %d tracking changes of %d telemetry batches: %w", len(rows), len(batches), err)
	}
	return written, nil
}

// MirrorTelemetryBatch is MirrorTelemetry for one batch: the write a
// TelemetryIngestWorkflow retries batch by batch while the store fails,
// also as an ordinary activity (its input then in the history).
func (a *MirrorActivities) MirrorTelemetryBatch(ctx context.Context, batch converter.RawValue) ([]contract.TelemetryWritten, error) {
	return a.MirrorTelemetry(ctx, []converter.RawValue{batch})
}

// decodeTelemetry decodes batches into their rows, in order, and each
// site's last change among them. A RawValue reaches an activity already
// through the worker's payload codec, if any (payloadcipher); under it a
// batch is compressed JSON or, from a site before compression, the SDK's
// default converter's (temporalcontract.DecodeTelemetryBatch reads both).
// A batch that does not decode is refused for good: retrying it cannot
// help.
func decodeTelemetry(batches []converter.RawValue) ([]contract.TrackedOperation, []contract.TelemetryWritten, error) {
	var rows []contract.TrackedOperation
	var written []contract.TelemetryWritten
	for i, raw := range batches {
		batch, err := temporalcontract.DecodeTelemetryBatch(raw.Payload())
		if err != nil {
			return nil, nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("decode telemetry batch %d of %d: %v", i+1, len(batches), err), ErrTypeBadTelemetry, err)
		}
		if len(batch.Rows) == 0 {
			continue
		}
		rows = append(rows, batch.Rows...)
		written = append(written, contract.TelemetryWritten{SiteID: batch.SiteID, Seq: batch.Rows[len(batch.Rows)-1].Seq})
	}
	return rows, written, nil
}

// ErrTypeBadTelemetry fails a telemetry batch that does not decode.
const ErrTypeBadTelemetry = "BadTelemetryBatch"

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
	_, err := a.Store.MirrorReconciled(ctx, in.SiteID, in.Rows, in.Cursor, audit.SiteCallChanges)
	return err
}
