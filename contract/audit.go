package contract

import "time"

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
