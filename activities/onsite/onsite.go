// Package onsite holds the activities a site's daemon serves on its task
// queue (outpost-site-<id>): they deliver cached calls to site-local targets
// and keep the site's tracking table. It depends on nothing of central, so
// the site SDK and daemon link no central code.
package onsite

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/activities/heartbeat"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/callstate"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targetexec"
	"github.com/outpost-dev/outpost/internal/targets"
)

// SiteActivities run on a site's task queue (outpost-site-<id>), served by
// its daemon: they deliver cached calls to site-local targets and keep the
// site's tracking table, the status record of every cached call.
type SiteActivities struct {
	Store *sitestore.Store
	// Targets are the site's definitions: each retry's policy.
	Targets *targets.Registry
	// Executor makes each retry's attempt at its target.
	Executor *targetexec.Executor
	// Node names this daemon in messages.
	Node string
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// locks serialise the attempts at one call: a workflow's retry and the
	// site's own (RetryOnSite) never run at once, so neither repeats the
	// other's.
	locks [64]sync.Mutex
}

// lock takes the lock of operation id and returns its release.
func (a *SiteActivities) lock(id string) func() {
	h := fnv.New32a()
	h.Write([]byte(id))
	m := &a.locks[h.Sum32()%uint32(len(a.locks))]
	m.Lock()
	return m.Unlock
}

func (a *SiteActivities) now() time.Time {
	if a.Now == nil {
		return time.Now().UTC()
	}
	return a.Now().UTC()
}

// DeliverCachedCall makes one retry of a buffered cached call and records
// its outcome on the tracking row: Delivered, Retrying or Parked. A retry the
// row already records (the activity task was redelivered after the site
// wrote it) is not made again. A call whose definition allows no retries
// (max_retries 0) parks on its immediate attempt's error with no retry. It
// heartbeats while it works, waiting for the call's lock included: a
// daemon that dies mid-attempt is seen gone within heartbeat.Timeout.
func (a *SiteActivities) DeliverCachedCall(ctx context.Context, in contract.DeliverCachedCallInput) (contract.TrackedOperation, error) {
	defer heartbeat.While(ctx)()
	defer a.lock(in.OperationID)()
	return a.retry(ctx, in)
}

// RetryOnSite makes the due retry of a cached call central has not taken
// over, if it is still due once the call's lock is held: while central is unreachable (its hand-off not acknowledged) the
// site retries at the definition's interval, counted against max_retries,
// and parks the call when they are used up. A call handed off meanwhile is
// left to its workflow: one driver at a time.
func (a *SiteActivities) RetryOnSite(ctx context.Context, id string) (contract.TrackedOperation, error) {
	defer a.lock(id)()
	row, err := a.operation(ctx, id)
	if err != nil || !callstate.Retryable(row.Status) || row.NextAttemptAt == nil || row.NextAttemptAt.After(a.now()) {
		return row, err // not due (any more): a retry made meanwhile moved it on
	}
	handedOff, err := a.Store.HandedOff(ctx, id)
	if err != nil || handedOff {
		return row, err
	}
	payload, err := a.Store.OperationPayload(ctx, id)
	if err != nil {
		return row, err
	}
	req, err := targets.Decode(payload)
	if err != nil {
		return row, fmt.Errorf("decode buffered call %s: %w", id, err)
	}
	return a.retry(ctx, contract.DeliverCachedCallInput{OperationID: id, RetryCount: row.RetryCount, Policy: a.Targets.Policy(req)})
}

// retry makes retry number in.RetryCount+1 of a call, under its lock.
func (a *SiteActivities) retry(ctx context.Context, in contract.DeliverCachedCallInput) (contract.TrackedOperation, error) {
	row, err := a.operation(ctx, in.OperationID)
	if err != nil {
		return row, err
	}
	if row.RetryCount != in.RetryCount || !callstate.Retryable(row.Status) {
		return row, nil
	}
	if callstate.ImmediateWasLast(row, in.Policy) {
		// Park on the immediate attempt's error, without calling the target.
		return a.Store.RecordAttempt(ctx, sitestore.Attempt{OperationID: in.OperationID, Status: contract.StatusParked,
			RetryCount: row.RetryCount, LastError: callstate.Exhausted(in.Policy.MaxRetries, row.LastError)})
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
	status, lastError := callstate.RetryOutcome(outcome, retries, in.Policy.MaxRetries)
	attempt := sitestore.Attempt{OperationID: in.OperationID, Status: status, RetryCount: retries, LastError: lastError, At: &at}
	if status == contract.StatusRetrying {
		next := callstate.NextAttemptAt(at, in.Policy.Interval, outcome)
		attempt.NextAttemptAt = &next
	}
	return a.Store.RecordAttempt(ctx, attempt)
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
	_, err = a.Executor.Execute(ctx, req)
	return err
}

// ResolveParkedCall applies an operator's retry (back to Retrying, retry
// count reset) or discard (Discarded; the buffered call is dropped) to a
// parked call. On a call no longer parked (an earlier run of this activity
// applied it) it returns the row unchanged. A discard a cancel request asked
// for (in.Cancelled) applies to any call not yet final. It heartbeats
// while it waits for the call's lock, which an attempt may hold.
func (a *SiteActivities) ResolveParkedCall(ctx context.Context, in contract.ResolveParkedCallInput) (contract.TrackedOperation, error) {
	defer heartbeat.While(ctx)()
	defer a.lock(in.OperationID)()
	row, err := a.operation(ctx, in.OperationID)
	if err != nil {
		return row, err
	}
	event := callstate.OperatorDiscard
	switch {
	case in.Cancelled:
		event = callstate.Cancelled
	case in.Retry:
		event = callstate.OperatorRetry
	}
	status, ok := callstate.Next(row.Status, event, row.RetryCount, 0)
	if !ok {
		return row, nil // only a parked call waits for an operator; a final one takes nothing
	}
	attempt := sitestore.Attempt{OperationID: in.OperationID, Status: status, RetryCount: row.RetryCount, LastError: row.LastError}
	if status == contract.StatusRetrying {
		now := a.now()
		attempt.RetryCount, attempt.NextAttemptAt = 0, &now
	}
	return a.Store.RecordAttempt(ctx, attempt)
}

// ListTrackingChanges answers central's reconciliation pull.
// A cursor past the store's last change number comes from an earlier store
// of this site (the file was replaced and numbering began again): it fails
// non-retryable, ErrTypeCursorAhead, so central starts over from 0.
func (a *SiteActivities) ListTrackingChanges(ctx context.Context, in contract.ListTrackingChangesInput) ([]contract.TrackedOperation, error) {
	last, err := a.Store.LastSeq(ctx)
	if err != nil {
		return nil, err
	}
	if in.After > last {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("cursor %d is past this site's last change %d (was the site store replaced?)", in.After, last),
			contract.ErrTypeCursorAhead, nil)
	}
	return a.Store.ChangesSince(ctx, in.After, in.Limit)
}

// operation reads the tracking row. An id this daemon does not hold fails
// retryably: the task queue may have handed it to the wrong one of two
// daemons with the same site id, and a retry reaches the other.
func (a *SiteActivities) operation(ctx context.Context, id string) (contract.TrackedOperation, error) {
	row, err := a.Store.GetOperation(ctx, id)
	if errors.Is(err, sitestore.ErrNotFound) {
		return row, temporal.NewApplicationErrorWithCause(
			fmt.Sprintf("operation %s is not in this daemon's tracking table (node %q): another daemon with this "+
				"site id holds it, or the site store was replaced; retried until the daemon that holds it answers", id, a.Node),
			contract.ErrTypeUnknownOperation, err)
	}
	return row, err
}
