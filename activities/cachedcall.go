package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/workflows"
)

// SiteActivities run on a site's task queue (outpost-site-<id>), served by
// its daemon: they deliver cached calls to site-local targets and keep the
// site's tracking table, the status record of every cached call.
type SiteActivities struct {
	Store   *sitestore.Store
	Targets *targets.Registry
	// Node names this daemon in messages.
	Node string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (a *SiteActivities) now() time.Time { return utcNow(a.Now) }

// DeliverCachedCall makes one retry of a buffered cached call and records
// its outcome on the tracking row: Delivered, Retrying or Parked. A retry the
// row already records (the activity task was redelivered after the site
// wrote it) is not made again. A call whose definition allows no retries
// (max_retries 0) parks on its immediate attempt's error with no retry.
func (a *SiteActivities) DeliverCachedCall(ctx context.Context, in workflows.DeliverCachedCallInput) (workflows.TrackedOperation, error) {
	row, err := a.operation(ctx, in.OperationID)
	if err != nil {
		return row, err
	}
	if row.RetryCount != in.RetryCount || !retryable(row.Status) {
		return row, nil
	}
	if immediateWasLast(row, in.Policy) {
		// Park on the immediate attempt's error, without calling the target.
		return a.Store.RecordAttempt(ctx, sitestore.Attempt{OperationID: in.OperationID, Status: workflows.StatusParked,
			RetryCount: row.RetryCount, LastError: exhausted(in.Policy.MaxRetries, row.LastError)})
	}
	payload, err := a.Store.OperationPayload(ctx, in.OperationID)
	if err != nil && !errors.Is(err, sitestore.ErrNotFound) {
		// A store error fails the activity (Temporal retries it): it must
		// not use up one of the call's retries.
		return row, err
	}
	outcome := a.deliver(ctx, in.OperationID, payload, err)
	at := a.now()
	retries := in.RetryCount + 1
	status, lastError := RetryOutcome(outcome, retries, in.Policy.MaxRetries)
	attempt := sitestore.Attempt{OperationID: in.OperationID, Status: status, RetryCount: retries, LastError: lastError, At: &at}
	if status == workflows.StatusRetrying {
		next := NextAttemptAt(at, in.Policy.Interval, outcome)
		attempt.NextAttemptAt = &next
	}
	return a.Store.RecordAttempt(ctx, attempt)
}

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
func ImmediateOutcome(err error) (workflows.Status, string) {
	if err == nil {
		return workflows.StatusDelivered, ""
	}
	if isTransient(err) {
		return workflows.StatusPending, err.Error()
	}
	return workflows.StatusFailed, err.Error()
}

// isTransient reports whether a failed attempt may succeed later. A request
// that cannot run at all (*targets.InvalidError) is not.
func isTransient(err error) bool {
	var failure *targets.Failure
	return errors.As(err, &failure) && !failure.Permanent
}

// RetryOutcome is a cached call's status and last error after retry number
// retries ended with err (nil: delivered).
func RetryOutcome(err error, retries, maxRetries int) (workflows.Status, string) {
	if err == nil {
		return workflows.StatusDelivered, ""
	}
	permanent := !isTransient(err)
	switch status := workflows.AfterFailedAttempt(retries, maxRetries, permanent); {
	case status == workflows.StatusRetrying:
		return status, err.Error()
	case permanent:
		return status, "permanent failure: " + err.Error()
	default:
		return status, exhausted(maxRetries, err.Error())
	}
}

// exhausted is the last error of a call parked because its retries are used up.
func exhausted(maxRetries int, lastError string) string {
	return fmt.Sprintf("retries exhausted (%d): %s", maxRetries, lastError)
}

// immediateWasLast reports whether row's failed immediate attempt (recorded
// on the site: Pending with an attempt time) was the last attempt policy
// allows, that is, it allows no retries. The workflow asks for a first
// retry all the same, so its commands do not depend on the policy. A
// Pending row without an attempt time never finished its immediate
// attempt: the retry stands in for it.
func immediateWasLast(row workflows.TrackedOperation, policy workflows.RetryPolicy) bool {
	return row.Status == workflows.StatusPending && row.LastAttemptAt != nil && row.RetryCount >= policy.MaxRetries
}

// deliver runs the buffered call once; nil is success. A call missing from
// the buffer or unreadable is a permanent failure: it parks for an operator.
func (a *SiteActivities) deliver(ctx context.Context, id string, payload []byte, readErr error) error {
	if readErr != nil {
		return fmt.Errorf("the buffered call is missing from the site store: %w", readErr)
	}
	req, err := targets.Decode(payload)
	if err != nil {
		return err
	}
	req.IdempotencyKey = id
	_, err = a.Targets.Execute(ctx, req)
	return err
}

// ResolveParkedCall applies an operator's retry (back to Retrying, retry
// count reset) or discard (Discarded; the buffered call is dropped) to a
// parked call. On a call no longer parked (an earlier run of this activity
// applied it) it returns the row unchanged. A discard a cancel request asked
// for (in.Cancelled) applies to any call not yet final.
func (a *SiteActivities) ResolveParkedCall(ctx context.Context, in workflows.ResolveParkedCallInput) (workflows.TrackedOperation, error) {
	row, err := a.operation(ctx, in.OperationID)
	if err != nil || row.Status.Terminal() {
		return row, err
	}
	if row.Status != workflows.StatusParked && !in.Cancelled {
		return row, nil // only a parked call waits for an operator
	}
	attempt := sitestore.Attempt{
		OperationID: in.OperationID, Status: workflows.StatusDiscarded, RetryCount: row.RetryCount,
		LastError: row.LastError,
	}
	if in.Retry {
		now := a.now()
		attempt.Status, attempt.RetryCount, attempt.NextAttemptAt = workflows.StatusRetrying, 0, &now
	}
	return a.Store.RecordAttempt(ctx, attempt)
}

// ListTrackingChanges answers central's reconciliation pull.
// A cursor past the store's last change number comes from an earlier store
// of this site (the file was replaced and numbering began again): it fails
// non-retryable, ErrTypeCursorAhead, so central starts over from 0.
func (a *SiteActivities) ListTrackingChanges(ctx context.Context, in workflows.ListTrackingChangesInput) ([]workflows.TrackedOperation, error) {
	last, err := a.Store.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	if in.After > last {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("cursor %d is past this site's last change %d (was the site store replaced?)", in.After, last),
			workflows.ErrTypeCursorAhead, nil)
	}
	return a.Store.ChangesSince(ctx, in.After, in.Limit)
}

// operation reads the tracking row. An id this daemon does not hold fails
// retryably: the task queue may have handed it to the wrong one of two
// daemons with the same site id, and a retry reaches the other.
func (a *SiteActivities) operation(ctx context.Context, id string) (workflows.TrackedOperation, error) {
	row, err := a.Store.GetOperation(ctx, id)
	if errors.Is(err, sitestore.ErrNotFound) {
		return row, temporal.NewApplicationErrorWithCause(
			fmt.Sprintf("operation %s is not in this daemon's tracking table (node %q): another daemon with this "+
				"site id holds it, or the site store was replaced; retried until the daemon that holds it answers", id, a.Node),
			workflows.ErrTypeUnknownOperation, err)
	}
	return row, err
}

// retryable reports whether a call in status s takes a delivery attempt.
func retryable(s workflows.Status) bool {
	return s == workflows.StatusPending || s == workflows.StatusRetrying
}

// MirrorActivities keep central's site_calls mirror and audit what each
// mirrored row shows, in the same transaction.
type MirrorActivities struct {
	Store   *centralstore.Store
	Observe EventObserver
}

// MirrorSiteCalls upserts a telemetry batch with its audit events.
func (a *MirrorActivities) MirrorSiteCalls(ctx context.Context, rows []workflows.TrackedOperation) (int, error) {
	events := siteCallEvents(rows)
	n, err := a.Store.UpsertSiteCalls(ctx, rows, events...)
	if err != nil {
		return n, err
	}
	a.Observe.observe(events...)
	return n, nil
}

// siteCallEvents is the events of every row, stale ones included: event
// ids are deterministic, so an event already stored is not stored again.
func siteCallEvents(rows []workflows.TrackedOperation) []centralstore.AuditEvent {
	var events []centralstore.AuditEvent
	for _, r := range rows {
		events = append(events, audit.SiteCallEvents(r)...)
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
func (a *MirrorActivities) MirrorReconciled(ctx context.Context, in workflows.MirrorReconciledInput) error {
	events := siteCallEvents(in.Rows)
	if _, err := a.Store.MirrorReconciled(ctx, in.SiteID, in.Rows, in.Cursor, events...); err != nil {
		return err
	}
	a.Observe.observe(events...)
	return nil
}
