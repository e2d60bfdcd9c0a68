package contract

// PurgeScheduleID names the Temporal Schedule that runs the purge workflow
// daily (operators see and trigger it on the Web UI's Schedules page).
const PurgeScheduleID = "outpost-purge"

// PurgeResult counts the rows a purge deleted, per central table.
type PurgeResult struct {
	Notifications int `json:"notifications"`
	SiteCalls     int `json:"siteCalls"`
	AuditLog      int `json:"auditLog"`
	// More is true when the purge stopped at its cap with rows still due:
	// the next run goes on.
	More bool `json:"more,omitempty"`
}
