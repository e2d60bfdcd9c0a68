package contract

// TelemetryBatch is a batch of a site's tracking-row changes, oldest first.
type TelemetryBatch struct {
	SiteID string             `json:"siteId"`
	Rows   []TrackedOperation `json:"rows"`
}

// TelemetryMaxBytes bounds a batch's JSON. Temporal refuses a workflow
// input over 2 MB (its default blob size limit), and a change can carry a
// last error of 2,000 characters, up to six bytes each in JSON: without a
// bound, a batch of long errors would be refused on every send, and the
// outbox behind it would never move.
const TelemetryMaxBytes = 1 << 20

// MirrorReconciledInput is one page of a reconciliation pull.
type MirrorReconciledInput struct {
	SiteID string             `json:"siteId"`
	Rows   []TrackedOperation `json:"rows"`
	// Cursor is the highest change number in Rows: the site's next pull starts after it.
	Cursor int64 `json:"cursor"`
}

// ListTrackingChangesInput asks a site for tracking rows changed after a cursor.
type ListTrackingChangesInput struct {
	After int64 `json:"after"`
	Limit int   `json:"limit"`
}

// ReconcileInput names the site to reconcile.
type ReconcileInput struct {
	SiteID string `json:"siteId"`
	// PageSize is how many rows one pull asks for. Default 200.
	PageSize int `json:"pageSize,omitempty"`
}

// ReconcileResult says what one reconciliation run pulled.
type ReconcileResult struct {
	Rows   int   `json:"rows"`
	Cursor int64 `json:"cursor"`
}

// SettleTerminatedResult is what SettleTerminated found of a site's
// operations whose workflows were terminated before they finished:
// notifications it discarded on central, and calls still to discard on the
// site.
type SettleTerminatedResult struct {
	Notifications []string `json:"notifications,omitempty"`
	Calls         []string `json:"calls,omitempty"`
}

// ErrTypeCursorAhead fails a pull whose cursor is past the site's last
// change number: the site's store was replaced.
const ErrTypeCursorAhead = "CursorAhead"

// TelemetryWritten is the last change of a site that a telemetry write
// stored: what TelemetryIngestWorkflow answers to QueryTelemetryWritten.
type TelemetryWritten struct {
	SiteID string `json:"siteId"`
	Seq    int64  `json:"seq"`
}
