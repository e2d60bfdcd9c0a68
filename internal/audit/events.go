// Package audit derives the audit log's events from what central sees of an
// operation. The central store writes them in the transaction of the change
// they describe.
//
// Event ids are deterministic: the same fact always gets the same id, and
// audit_log stores an id once, so recording an event again (a retried
// activity, a telemetry batch and a reconciliation carrying the same row) is
// harmless. An id is the operation's workflow id followed by:
//
//	/enqueued
//	/attempt/<n>                     a notification's nth delivery attempt of its run (from 1), failed
//	/attempt/<n>/Delivered           the same, delivered: a replayed first attempt (its worker
//	                                 killed before the workflow task ended) may fail, then deliver
//	/attempt/<n>/lost/<unix ms>      a run of a notification's attempt n lost with its worker,
//	                                 found when the attempt ran again at that time
//	/attempt/<retries>/<unix ms>     a cached call's attempt: retry count after it, and its time
//	/terminal/<status>               Delivered, Failed, Discarded
//	/terminal/Parked/<attempt key>   a park (it can happen again after an operator retry)
//	/operator/<n>                    the nth operator retry or discard of the run
//
// for example notification/343ebf6c-…/attempt/3 or call/9b1c…/terminal/Delivered.
//
// audit_log keeps one row per change: the functions ending in Rows give a
// change's events as stored, the last of them (its Terminal event or park,
// when it has one) carrying the others (centralstore.AuditEvent.Carries).
// Which events ride together is decided from the change alone, so an event
// is only ever carried by one row: a resend or reconciliation of the same
// change stores nothing twice and loses nothing.
package audit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// NotificationEnqueued is the event of central recording notification n, at
// the time the site accepted it, submitted by submittedBy (its operator:
// the holder of the site API token it came with).
func NotificationEnqueued(n centralstore.Notification, submittedBy string) centralstore.AuditEvent {
	return centralstore.AuditEvent{
		EventID: contract.NotificationWorkflowID(n.NotificationID) + "/enqueued", OperationID: n.NotificationID,
		Kind: contract.KindNotification, SiteID: n.SourceSiteID, SourceNode: n.SourceNode, Event: centralstore.AuditEnqueued,
		Status: contract.StatusPending, Detail: "list " + n.ListName, Operator: submittedBy, At: n.SiteEnqueuedAt,
	}
}

// NotificationDelivered is the successful delivery attempt number attempt
// (DeliverNotificationInput.Attempt) of notification id and its Terminal
// event.
func NotificationDelivered(id, siteID, node string, attempt, retryCount int, at time.Time, recipients []string) []centralstore.AuditEvent {
	prefix := contract.NotificationWorkflowID(id)
	base := centralstore.AuditEvent{
		OperationID: id, Kind: contract.KindNotification, SiteID: siteID, SourceNode: node, Status: contract.StatusDelivered, At: at,
	}
	attemptEvent, terminal := base, base
	// Not the failed attempt's id: a first attempt replayed after its
	// worker was killed has the same number, and both outcomes happened.
	attemptEvent.EventID = prefix + "/attempt/" + strconv.Itoa(attempt) + "/" + string(contract.StatusDelivered)
	attemptEvent.Event = centralstore.AuditAttempt
	attemptEvent.Detail = retryDetail(retryCount, "")
	terminal.EventID, terminal.Event = prefix+"/terminal/"+string(contract.StatusDelivered), centralstore.AuditTerminal
	terminal.Detail = "delivered to " + strings.Join(recipients, ", ")
	return []centralstore.AuditEvent{attemptEvent, terminal}
}

// NotificationAttemptLost is the event of a run of attempt number attempt
// of notification n that its worker did not live to report: found at
// rerunAt, when the attempt ran again and found n's row recorded by the
// lost run. Whether the lost run reached the receiver is unknown; it began
// about when it recorded the row, so the event takes that time.
func NotificationAttemptLost(n centralstore.Notification, attempt int, rerunAt time.Time) centralstore.AuditEvent {
	return centralstore.AuditEvent{
		EventID:     contract.NotificationWorkflowID(n.NotificationID) + "/attempt/" + strconv.Itoa(attempt) + "/lost/" + strconv.FormatInt(rerunAt.UnixMilli(), 10),
		OperationID: n.NotificationID, Kind: contract.KindNotification, SiteID: n.SourceSiteID, SourceNode: n.SourceNode,
		Event: centralstore.AuditAttempt, Status: contract.StatusPending, At: n.CreatedAt,
		Detail: "outcome unknown: the worker making this attempt stopped before it reported, and the attempt was made again",
	}
}

// NotificationDeliveredRows is NotificationDelivered as audit_log stores
// it: the Terminal event carrying the attempt.
func NotificationDeliveredRows(id, siteID, node string, attempt, retryCount int, at time.Time, recipients []string) []centralstore.AuditEvent {
	return group(NotificationDelivered(id, siteID, node, attempt, retryCount, at, recipients), true)
}

// NotificationUpdatedRows is NotificationUpdated(u) as audit_log stores it:
// a park carries its attempt, a discard's Terminal event the operator's
// discard before it. The first attempt of a run stays a row of its own:
// it runs as a local activity with the write that records its failure,
// and a worker killed before the workflow task ends has it made again on
// replay, where it may fail the other way (recorded Retrying, then
// parking).
func NotificationUpdatedRows(u contract.NotificationUpdate) []centralstore.AuditEvent {
	return group(NotificationUpdated(u), u.Status != contract.StatusParked || u.Attempt > 1)
}

// NotificationUpdated is the events a status change written by the
// NotificationWorkflow records: a failed attempt (Retrying or Parked, and a
// park's Terminal event), an operator's retry or discard, a discard's
// Terminal event, and a delivery its attempt could not record. A change
// that records none of these gives none.
func NotificationUpdated(u contract.NotificationUpdate) []centralstore.AuditEvent {
	if u.Status == contract.StatusDelivered && u.Attempt > 0 {
		return NotificationDelivered(u.NotificationID, u.SiteID, "", u.Attempt, u.RetryCount, u.DeliveredAt, u.ResolvedTargets)
	}
	prefix := contract.NotificationWorkflowID(u.NotificationID)
	base := centralstore.AuditEvent{
		OperationID: u.NotificationID, Kind: contract.KindNotification, SiteID: u.SiteID, Status: u.Status, At: u.At,
	}
	var out []centralstore.AuditEvent
	if u.Attempt > 0 {
		e := base
		e.EventID, e.Event = prefix+"/attempt/"+strconv.Itoa(u.Attempt), centralstore.AuditAttempt
		e.Detail = retryDetail(u.RetryCount, u.LastError)
		if u.LastAttemptAt != nil {
			e.At = *u.LastAttemptAt
		}
		out = append(out, e)
		if u.Status == contract.StatusParked {
			park := e
			park.EventID, park.Event = prefix+"/terminal/Parked/"+strconv.Itoa(u.Attempt), centralstore.AuditTerminal
			out = append(out, park)
		}
	}
	if u.OperatorAction != nil && u.OperatorSeq > 0 {
		out = append(out, operatorEvent(base, prefix, u.OperatorSeq, u.Status != contract.StatusDiscarded, *u.OperatorAction))
	}
	if u.Status == contract.StatusDiscarded {
		e := base
		e.EventID, e.Event, e.Detail = prefix+"/terminal/"+string(contract.StatusDiscarded), centralstore.AuditTerminal, u.LastError
		out = append(out, e)
	}
	return out
}

// OperatorAction is the event of an operator's retry or discard of a parked
// cached call.
func OperatorAction(a contract.OperatorActionAudit) centralstore.AuditEvent {
	base := centralstore.AuditEvent{OperationID: a.OperationID, Kind: a.Kind, SiteID: a.SiteID, Status: a.Status, At: a.At}
	return operatorEvent(base, contract.CachedCallWorkflowID(a.OperationID), a.Seq, a.Retry, a.Action)
}

func operatorEvent(base centralstore.AuditEvent, prefix string, seq int, retry bool, action contract.OperatorAction) centralstore.AuditEvent {
	e := base
	e.EventID, e.Event = prefix+"/operator/"+strconv.Itoa(seq), centralstore.AuditOperatorDiscard
	if retry {
		e.Event = centralstore.AuditOperatorRetry
	}
	e.Operator, e.Reason = action.Operator, action.Reason
	return e
}

// SiteCallEvents is what a mirrored tracking row shows of its cached call:
// first Enqueued (its operator is who submitted the call); an Attempt when the row is the outcome of
// one (it has a last attempt, and is not an operator's discard or the
// reset of an operator's retry); a Terminal event for Delivered, Failed,
// Discarded and Parked. Telemetry sends every change of a row, each as the
// row stood after it, so every attempt has its event; only a row that
// reconciliation heals (its pull reads rows as they stand now) can skip one.
func SiteCallEvents(row contract.TrackedOperation) []centralstore.AuditEvent {
	prefix := contract.CachedCallWorkflowID(row.OperationID)
	base := centralstore.AuditEvent{
		OperationID: row.OperationID, Kind: row.Kind, SiteID: row.SourceSiteID, SourceNode: row.SourceNode, Status: row.Status,
	}
	enqueued := base
	enqueued.EventID, enqueued.Event, enqueued.Status = prefix+"/enqueued", centralstore.AuditEnqueued, contract.StatusPending
	enqueued.Detail, enqueued.At, enqueued.Operator = "target "+row.Target, row.CreatedAt, row.SubmittedBy
	out := []centralstore.AuditEvent{enqueued}

	key := attemptKey(row)
	if row.LastAttemptAt != nil && isAttemptOutcome(row) {
		e := base
		e.EventID, e.Event = prefix+"/attempt/"+key, centralstore.AuditAttempt
		e.Detail, e.At = retryDetail(row.RetryCount, row.LastError), *row.LastAttemptAt
		out = append(out, e)
	}
	switch row.Status {
	case contract.StatusParked:
		e := base
		e.EventID, e.Event = prefix+"/terminal/Parked/"+key, centralstore.AuditTerminal
		e.Detail, e.At = retryDetail(row.RetryCount, row.LastError), row.UpdatedAt
		if row.LastAttemptAt != nil {
			e.At = *row.LastAttemptAt
		}
		out = append(out, e)
	case contract.StatusDelivered, contract.StatusFailed, contract.StatusDiscarded:
		e := base
		e.EventID, e.Event = prefix+"/terminal/"+string(row.Status), centralstore.AuditTerminal
		e.Detail, e.At = retryDetail(row.RetryCount, row.LastError), row.UpdatedAt
		if row.TerminalAt != nil {
			e.At = *row.TerminalAt
		}
		out = append(out, e)
	}
	return out
}

// SiteCallRows is SiteCallEvents(row) as audit_log stores them: the
// change's Terminal event carrying its attempt and, when the change
// created the call's central row (created), its Enqueued event; a change
// of a row central holds already leaves Enqueued out, stored with the row.
// A call parked with retry count 0 parked on its immediate attempt's
// failure without another attempt (callstate.ImmediateWasLast): that
// attempt was a change of its own, Pending, before, so it stays a row of
// its own.
func SiteCallRows(row contract.TrackedOperation, created bool) []centralstore.AuditEvent {
	events := SiteCallEvents(row)
	if !created {
		events = events[1:] // SiteCallEvents begins with Enqueued
	}
	return group(events, row.Status != contract.StatusParked || row.RetryCount > 0)
}

// SiteCallChanges is the audit rows of every change in rows, a write of
// tracking rows that inserted the central rows of the operation ids in
// created: an operation's Enqueued event rides with its first change in
// rows. Stale changes are included: event ids and the events a row carries
// are deterministic, so an event already stored is not stored again.
func SiteCallChanges(rows []contract.TrackedOperation, created map[string]bool) []centralstore.AuditEvent {
	var events []centralstore.AuditEvent
	enqueued := make(map[string]bool, len(created))
	for _, r := range rows {
		first := created[r.OperationID] && !enqueued[r.OperationID]
		enqueued[r.OperationID] = enqueued[r.OperationID] || first
		events = append(events, SiteCallRows(r, first)...)
	}
	return events
}

// group makes the events of one change, oldest first, the rows audit_log
// stores: the change's last event carries the others, so the change costs
// one row. An Attempt stays a row of its own when attemptRides is false:
// an earlier change may have stored it alone, and a row carrying it would
// store it twice.
func group(events []centralstore.AuditEvent, attemptRides bool) []centralstore.AuditEvent {
	var rows, riders []centralstore.AuditEvent
	for _, e := range events {
		if e.Event == centralstore.AuditAttempt && !attemptRides {
			rows = append(rows, e)
		} else {
			riders = append(riders, e)
		}
	}
	if len(riders) == 0 {
		return rows
	}
	head := riders[len(riders)-1]
	if len(riders) > 1 {
		head.Carries = slices.Clone(riders[:len(riders)-1])
	}
	return append(rows, head)
}

// isAttemptOutcome reports whether row's state was made by a delivery
// attempt: not by a discard, nor by an operator's retry (Retrying with the
// count reset; a retry's own outcome counts from 1).
func isAttemptOutcome(row contract.TrackedOperation) bool {
	switch row.Status {
	case contract.StatusDiscarded:
		return false
	case contract.StatusRetrying:
		return row.RetryCount > 0
	}
	return true
}

// attemptKey names a cached call's attempt: its retry count restarts after
// an operator retry, so the attempt's time goes with it.
func attemptKey(row contract.TrackedOperation) string {
	at := row.UpdatedAt
	if row.LastAttemptAt != nil {
		at = *row.LastAttemptAt
	}
	return strconv.Itoa(row.RetryCount) + "/" + strconv.FormatInt(at.UnixMilli(), 10)
}

func retryDetail(retryCount int, lastError string) string {
	if lastError == "" {
		return fmt.Sprintf("retry count %d", retryCount)
	}
	return fmt.Sprintf("retry count %d: %s", retryCount, lastError)
}
