// Package callstate owns the cached call's state machine: what status,
// last error and next attempt a call gets after each attempt and each
// operator action (Next), and the retry rule a notification's attempts
// follow too (AfterFailedAttempt). The site's immediate attempt
// (site.Client), its retries and operator actions (activities/onsite) and
// the workflows all follow it. It is pure (no I/O, no clock of its own)
// and imports only the contract, so the workflows can use it.
package callstate

import (
	"errors"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// Event is what happens to a cached call.
type Event int

// The events of a cached call.
const (
	// Delivered: an attempt succeeded.
	Delivered Event = iota
	// FailedTransient: an attempt failed, and a later one may succeed.
	FailedTransient
	// FailedPermanent: an attempt failed, and no retry can help.
	FailedPermanent
	// OperatorRetry: an operator sent a parked call back to delivery.
	OperatorRetry
	// OperatorDiscard: an operator ended a parked call.
	OperatorDiscard
	// Cancelled: the call's workflow was asked to cancel, a discard of a
	// call in any status not yet final.
	Cancelled
)

// Events lists every event.
func Events() []Event {
	return []Event{Delivered, FailedTransient, FailedPermanent, OperatorRetry, OperatorDiscard, Cancelled}
}

func (e Event) String() string {
	return [...]string{"Delivered", "FailedTransient", "FailedPermanent", "OperatorRetry", "OperatorDiscard", "Cancelled"}[e]
}

// Next is the status a call in status takes on event, with retries the
// number of retries made counting the attempt that ended (0 for the
// site's immediate attempt, which only a Pending call makes) and
// maxRetries the policy's. ok is false, and
// the status unchanged, when the event does not apply: an attempt on a
// call not Pending or Retrying, an operator's action on a call not Parked,
// anything on a final call.
func Next(status contract.Status, event Event, retries, maxRetries int) (next contract.Status, ok bool) {
	switch {
	case status.Terminal():
		return status, false
	case event == Cancelled && (Retryable(status) || status == contract.StatusParked):
		return contract.StatusDiscarded, true
	case status == contract.StatusParked && event == OperatorRetry:
		return contract.StatusRetrying, true
	case status == contract.StatusParked && event == OperatorDiscard:
		return contract.StatusDiscarded, true
	case !Retryable(status) || event == OperatorRetry || event == OperatorDiscard:
		return status, false
	case event == Delivered:
		return contract.StatusDelivered, true
	case status == contract.StatusPending && retries == 0 && event == FailedTransient:
		return contract.StatusPending, true // the immediate attempt: queued for retry
	case status == contract.StatusPending && retries == 0:
		return contract.StatusFailed, true // the immediate attempt: answered to the script at once
	}
	return AfterFailedAttempt(retries, maxRetries, event == FailedPermanent), true
}

// AfterFailedAttempt is the status after a failed attempt, with retries the
// number of retries made so far counting this attempt (0 for a first
// attempt): Parked when the failure is permanent or the retries are used
// up, Retrying otherwise. A notification's first attempt is central's; a
// cached call's is the site's immediate attempt, so its retries start at 1.
func AfterFailedAttempt(retries, maxRetries int, permanent bool) contract.Status {
	if permanent || retries >= maxRetries {
		return contract.StatusParked
	}
	return contract.StatusRetrying
}

// failure is what callstate reads of a failed attempt: whether a later
// attempt may succeed, and how long the target asked to wait.
// targets.Failure answers it; any other error is permanent (a request
// that cannot run at all).
type failure interface {
	error
	Transient() bool
	AskedWait() time.Duration
}

// eventOf is the event an attempt that ended with err (nil: delivered) is.
func eventOf(err error) Event {
	var f failure
	switch {
	case err == nil:
		return Delivered
	case errors.As(err, &f) && f.Transient():
		return FailedTransient
	}
	return FailedPermanent
}

// NextAttemptAt is when an attempt that failed at at with err is tried
// again: one interval later, or later when the target asked for more
// (Retry-After on a 429 or 503), but never more than ten intervals later.
func NextAttemptAt(at time.Time, interval time.Duration, err error) time.Time {
	wait := interval
	var f failure
	if errors.As(err, &f) && f.AskedWait() > wait {
		wait = min(f.AskedWait(), maxRetryAfterIntervals*interval)
	}
	return at.Add(wait)
}

// maxRetryAfterIntervals caps a target's Retry-After, in intervals: a
// target cannot hold a call back indefinitely.
const maxRetryAfterIntervals = 10

// ImmediateOutcome is a cached call's status and last error after the site's
// immediate attempt ended with err (nil: delivered): Delivered, Failed when
// retrying cannot help, or Pending, queued for retry through central.
func ImmediateOutcome(err error) (contract.Status, string) {
	status, _ := Next(contract.StatusPending, eventOf(err), 0, 0)
	if err == nil {
		return status, ""
	}
	return status, err.Error()
}

// RetryOutcome is a cached call's status and last error after retry number
// retries ended with err (nil: delivered).
func RetryOutcome(err error, retries, maxRetries int) (contract.Status, string) {
	event := eventOf(err)
	// A retry ends the same way from Pending and Retrying (TestNextCoversEveryStatusAndEvent).
	switch status, _ := Next(contract.StatusRetrying, event, retries, maxRetries); {
	case event == Delivered:
		return status, ""
	case status == contract.StatusRetrying:
		return status, err.Error()
	case event == FailedPermanent:
		return status, "permanent failure: " + err.Error()
	default:
		return status, Exhausted(maxRetries, err.Error())
	}
}

// Exhausted is the last error of a call parked because its retries are used up.
func Exhausted(maxRetries int, lastError string) string {
	return fmt.Sprintf("retries exhausted (%d): %s", maxRetries, lastError)
}

// ImmediateWasLast reports whether row's failed immediate attempt (recorded
// on the site: Pending with an attempt time) was the last attempt policy
// allows, that is, it allows no retries. The workflow asks for a first
// retry all the same, so its commands do not depend on the policy. A
// Pending row without an attempt time never finished its immediate
// attempt: the retry stands in for it.
func ImmediateWasLast(row contract.TrackedOperation, policy contract.RetryPolicy) bool {
	return row.Status == contract.StatusPending && row.LastAttemptAt != nil && row.RetryCount >= policy.MaxRetries
}

// Retryable reports whether a call in status s takes a delivery attempt.
func Retryable(s contract.Status) bool {
	return s == contract.StatusPending || s == contract.StatusRetrying
}
