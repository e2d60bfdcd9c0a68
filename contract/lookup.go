package contract

// ErrTypeNotFound fails a lookup of an id central has no row for.
const ErrTypeNotFound = "NotFound"

// LookupNotificationWorkflowID names the lookup of notification id:
// concurrent lookups of one id share a run.
func LookupNotificationWorkflowID(id string) string { return "lookup/" + NotificationWorkflowID(id) }
