package workflows

import (
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// CachedCallSubmission is what a site hands to central for a cached call whose
// immediate attempt failed transiently: the payload of SignalSubmit on
// workflow CachedCallWorkflowID(OperationID). The call itself (URL, SQL,
// arguments) stays on the site, which delivers it.
type CachedCallSubmission struct {
	OperationID string `json:"operationId"`
	Kind        string `json:"kind"`
	Target      string `json:"target"`
	SiteID      string `json:"siteId"`
	// Policy is the external system's or database connection's retry policy.
	Policy RetryPolicy `json:"policy"`
	// LastAttemptAt is the immediate attempt's time: the first retry waits
	// one interval from it. Nil when the site never finished that attempt.
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	// NextAttemptAt is when the target asked to be tried again, when that is
	// later than one interval (Retry-After); nil otherwise.
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	// Request is what the call sends (system, method and params, or
	// connection, SQL and args) with secret params redacted, at most
	// MaxRequestView bytes: for operators (status query, outpost status),
	// never for delivery, which reads the site's buffer.
	Request   json.RawMessage `json:"request,omitempty"`
	LastError string          `json:"lastError,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	// RetryCount and Status are where the site got with the call before
	// central took it over: it retries on its own while central is
	// unreachable, and parks a call whose retries are used up. The workflow
	// continues from there. Empty Status: Pending, retry count 0.
	RetryCount int    `json:"retryCount,omitempty"`
	Status     Status `json:"status,omitempty"`
}

// DeliverCachedCallInput asks the site for one retry of a cached call.
type DeliverCachedCallInput struct {
	OperationID string `json:"operationId"`
	// RetryCount is the number of retries already made; this attempt is
	// retry RetryCount+1. The site records each retry once: a redelivered
	// activity task for a retry already recorded returns the recorded row.
	RetryCount int         `json:"retryCount"`
	Policy     RetryPolicy `json:"policy"`
}

// ResolveParkedCallInput applies an operator's retry or discard to a parked
// cached call on its site.
type ResolveParkedCallInput struct {
	OperationID string         `json:"operationId"`
	Retry       bool           `json:"retry"`
	Action      OperatorAction `json:"action"`
	// Cancelled is a discard a cancel request asked for: it applies to a
	// call in any state that is not final, not only a parked one.
	Cancelled bool `json:"cancelled,omitempty"`
}

// Activity names of cached calls. The site daemon registers the first three
// on its task queue; the central worker registers the mirror activities.
const (
	ActivityDeliverCachedCall   = "DeliverCachedCall"
	ActivityResolveParkedCall   = "ResolveParkedCall"
	ActivityListTrackingChanges = "ListTrackingChanges"
)

// ErrTypeUnknownOperation fails a site activity on a daemon that does not
// hold the operation. It is retryable: another daemon polling the site's
// task queue (a second daemon with the same site id) may have taken the
// task, and the retry reaches the one that holds it. The site reports a
// second poller (outpost_site_other_pollers).
const ErrTypeUnknownOperation = "UnknownOperation"

// CachedCallWorkflow retries a cached call on its site at the definition's
// fixed interval until it is delivered or parks, then waits for an
// operator's retry or discard. The site's tracking row is the record: every
// attempt and every operator action is written there by a site activity,
// and reaches central's site_calls through telemetry.
func CachedCallWorkflow(ctx workflow.Context) (CachedCallState, error) {
	var sub CachedCallSubmission
	workflow.GetSignalChannel(ctx, SignalSubmit).Receive(ctx, &sub)
	ignoreDuplicateSubmits(ctx)

	c := &cachedCall{sub: sub, state: TrackedOperation{
		OperationID: sub.OperationID, Kind: sub.Kind, Target: sub.Target, Status: StatusPending, RetryCount: sub.RetryCount,
		LastError: sub.LastError, SourceSiteID: sub.SiteID, CreatedAt: sub.CreatedAt, LastAttemptAt: sub.LastAttemptAt,
	}}
	if sub.Status != "" {
		c.state.Status = sub.Status
	}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (CachedCallState, error) {
		return c.answer(), nil
	}); err != nil {
		return CachedCallState{}, fmt.Errorf("register status query: %w", err)
	}
	err := c.waitFirstRetry(ctx)
	if err == nil {
		err = c.run(ctx)
	}
	err = c.endCancelled(ctx, err)
	return c.answer(), err
}

// endCancelled ends a call a cancel request stopped (err is the
// cancellation) as Discarded on its site, audited like an operator's
// discard: a cancel from the Web UI must not leave the site's row Parked
// or Retrying and its buffer row behind. Any other outcome stands.
func (c *cachedCall) endCancelled(ctx workflow.Context, err error) error {
	if !temporal.IsCanceledError(err) {
		return err
	}
	workflow.GetLogger(ctx).Info("call cancelled; discarding it on its site", "operation", c.state.OperationID)
	ctx = afterCancel(ctx)
	in := ResolveParkedCallInput{OperationID: c.state.OperationID, Action: cancelledAction, Cancelled: true}
	if err := c.onSite(ctx, ActivityResolveParkedCall, in); err != nil {
		return err
	}
	c.lastAction = &cancelledAction
	c.operatorActions++
	return auditOperatorAction(ctx, OperatorActionAudit{
		OperationID: c.state.OperationID, Kind: c.sub.Kind, SiteID: c.sub.SiteID,
		Action: cancelledAction, Seq: c.operatorActions, Status: c.state.Status,
	})
}

// CachedCallState is what a cached call's workflow answers (status query
// and result): its tracking row, and the last operator action applied to
// it. The row's fields stay at the top level of the JSON, so a reader of a
// plain TrackedOperation still decodes it.
type CachedCallState struct {
	TrackedOperation
	LastOperatorAction *OperatorAction `json:"lastOperatorAction,omitempty"`
	// Request is the submission's view of what the call sends.
	Request json.RawMessage `json:"request,omitempty"`
}

// MaxRequestView bounds the request a submission carries for operators.
const MaxRequestView = 4 << 10

type cachedCall struct {
	sub   CachedCallSubmission
	state TrackedOperation
	// lastAction is the last operator action, who and why.
	lastAction *OperatorAction
	// operatorActions counts this run's operator actions, for the audit log.
	operatorActions int
}

// waitFirstRetry keeps the fixed interval between the site's last attempt
// (its immediate attempt, or its own last retry while central was away) and
// the next retry, or the longer wait the target asked for (no wait when the
// hand-off came later).
func (c *cachedCall) waitFirstRetry(ctx workflow.Context) error {
	if c.sub.LastAttemptAt == nil || c.sub.Status == StatusParked {
		return nil // a call parked on the site waits for an operator at once
	}
	due := c.sub.LastAttemptAt.Add(c.sub.Policy.Interval)
	if next := c.sub.NextAttemptAt; next != nil && next.After(due) {
		due = *next
	}
	wait := due.Sub(workflow.Now(ctx))
	if wait <= 0 {
		return nil
	}
	return workflow.Sleep(ctx, wait)
}

func (c *cachedCall) answer() CachedCallState {
	return CachedCallState{TrackedOperation: c.state, LastOperatorAction: c.lastAction, Request: c.sub.Request}
}

func (c *cachedCall) run(ctx workflow.Context) error {
	retryCh := workflow.GetSignalChannel(ctx, SignalRetry)
	discardCh := workflow.GetSignalChannel(ctx, SignalDiscard)
	// A call the site parked before central took it over shows Parked from
	// its start: an operator's action sent from then on is not stale.
	parkedFromStart := c.sub.Status == StatusParked
	for {
		if err := c.retryUntilSettled(ctx); err != nil || c.state.Status != StatusParked {
			return err
		}
		if !parkedFromStart {
			drainStale(retryCh, discardCh)
		}
		parkedFromStart = false
		action, retry := waitForOperator(ctx, retryCh, discardCh)
		cancelled := ctx.Err() != nil
		ctx = afterCancel(ctx) // a cancel is a discard, applied like one
		workflow.GetLogger(ctx).Info("operator action on parked call",
			"retry", retry, "operator", action.Operator, "reason", action.Reason)
		in := ResolveParkedCallInput{OperationID: c.state.OperationID, Retry: retry, Action: action, Cancelled: cancelled}
		if err := c.onSite(ctx, ActivityResolveParkedCall, in); err != nil {
			return err
		}
		c.lastAction = &action
		c.operatorActions++
		if err := auditOperatorAction(ctx, OperatorActionAudit{
			OperationID: c.state.OperationID, Kind: c.sub.Kind, SiteID: c.sub.SiteID, Retry: retry,
			Action: action, Seq: c.operatorActions, Status: c.state.Status,
		}); err != nil {
			return err
		}
		if c.state.Status.Terminal() {
			return nil
		}
	}
}

// retryUntilSettled makes retries until the call is delivered, parked or
// otherwise final. A Pending answer (the site's own immediate attempt was
// recorded late) is retried like Retrying: the workflow never ends on it.
func (c *cachedCall) retryUntilSettled(ctx workflow.Context) error {
	for {
		in := DeliverCachedCallInput{OperationID: c.state.OperationID, RetryCount: c.state.RetryCount, Policy: c.sub.Policy}
		if err := c.onSite(ctx, ActivityDeliverCachedCall, in); err != nil {
			return err
		}
		if c.state.Status != StatusRetrying && c.state.Status != StatusPending {
			return nil
		}
		if err := workflow.Sleep(ctx, c.untilNextAttempt(ctx)); err != nil {
			return err
		}
	}
}

// untilNextAttempt is the wait before the next retry: the fixed interval,
// or until the row's next attempt when the target asked for longer
// (Retry-After, capped by the site at ten intervals).
func (c *cachedCall) untilNextAttempt(ctx workflow.Context) time.Duration {
	wait := c.sub.Policy.Interval
	if next := c.state.NextAttemptAt; next != nil {
		wait = max(wait, next.Sub(workflow.Now(ctx)))
	}
	return wait
}

// onSite runs a site activity that returns the tracking row, and takes that
// row as the workflow's state. The site may be unreachable for a long time:
// the task waits in the site's queue, and a lost attempt (the site died
// mid-call) is tried again at the call's interval, forever; the site
// recognises an attempt it already recorded.
func (c *cachedCall) onSite(ctx workflow.Context, activity string, in any) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           SiteTaskQueue(c.sub.SiteID),
		StartToCloseTimeout: c.sub.Policy.AttemptTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: c.sub.Policy.Interval, BackoffCoefficient: 1, MaximumInterval: c.sub.Policy.Interval,
		},
	})
	var row TrackedOperation
	if err := workflow.ExecuteActivity(ctx, activity, in).Get(ctx, &row); err != nil {
		return fmt.Errorf("%s of %s on site %s: %w", activity, c.state.OperationID, c.sub.SiteID, err)
	}
	c.state = row
	setDetails(ctx, row.Status, row.RetryCount, row.LastError)
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrStatus.ValueSet(string(row.Status))); err != nil {
		return fmt.Errorf("set %s: %w", AttrStatus.GetName(), err)
	}
	return nil
}
