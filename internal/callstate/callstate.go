// Package callstate holds the cached-call state rules: what status, last
// error and next attempt a call gets after each attempt. The site's
// immediate attempt (site.Client), its retries (the site's
// DeliverCachedCall activity) and CachedCallWorkflow all follow them. It is
// pure: no I/O, no clock of its own.
package callstate

import (
	"errors"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/targets"
)

// NextAttemptAt is when an attempt that failed at at with err is tried
// again: one interval later, or later when the target asked for more
// (Retry-After on a 429 or 503), but never more than ten intervals later.
func NextAttemptAt(at time.Time, interval time.Duration, err error) time.Time {
	wait := interval
	var f *targets.Failure
	if errors.As(err, &f) && f.RetryAfter > wait {
		wait = min(f.RetryAfter, maxRetryAfterIntervals*interval)
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
	if err == nil {
		return contract.StatusDelivered, ""
	}
	if isTransient(err) {
		return contract.StatusPending, err.Error()
	}
	return contract.StatusFailed, err.Error()
}

// isTransient reports whether a failed attempt may succeed later. A request
// that cannot run at all (*targets.InvalidError) is not.
func isTransient(err error) bool {
	var failure *targets.Failure
	return errors.As(err, &failure) && !failure.Permanent
}

// RetryOutcome is a cached call's status and last error after retry number
// retries ended with err (nil: delivered).
func RetryOutcome(err error, retries, maxRetries int) (contract.Status, string) {
	if err == nil {
		return contract.StatusDelivered, ""
	}
	permanent := !isTransient(err)
	switch status := contract.AfterFailedAttempt(retries, maxRetries, permanent); {
	case status == contract.StatusRetrying:
		return status, err.Error()
	case permanent:
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
