package contract

import "time"

// TrackedOperation is one row of a site's tracking table: the answer of
// Tracking.Status, the unit of telemetry and reconciliation, and the row
// central mirrors in site_calls.
type TrackedOperation struct {
	OperationID    string `json:"operationId"`
	Kind           string `json:"kind"`   // KindExternalCall or KindDatabaseWrite
	Target         string `json:"target"` // "system.method" or the database name
	Status         Status `json:"status"`
	RetryCount     int    `json:"retryCount"`
	LastError      string `json:"lastError,omitempty"`
	SourceSiteID   string `json:"sourceSiteId"`
	SourceNode     string `json:"sourceNode,omitempty"`
	SourceInstance string `json:"sourceInstance,omitempty"`
	SourceScript   string `json:"sourceScript,omitempty"`
	// SubmittedBy is who submitted the operation: the holder of the site
	// API token it came with (site.api_tokens); empty without one.
	SubmittedBy   string     `json:"submittedBy,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	UpdatedAt     time.Time  `json:"updatedAt"`
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	TerminalAt    *time.Time `json:"terminalAt,omitempty"`
	// Seq is the site's change sequence number at this row's last change:
	// it grows with every change on the site, so central keeps the row with
	// the highest Seq and never moves back to an older state.
	Seq int64 `json:"seq"`
}
