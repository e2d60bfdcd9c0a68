package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/callstate"
	"github.com/outpost-dev/outpost/workflows/operation"
)

// CachedCallWorkflow delivers one cached call handed off by SignalWithStart
// (contract.WorkflowCachedCall): it waits for the submit signal, then goes
// on as CachedCallWorkflowStarted.
func CachedCallWorkflow(ctx workflow.Context) (contract.CachedCallState, error) {
	var sub contract.CachedCallSubmission
	workflow.GetSignalChannel(ctx, contract.SignalSubmit).Receive(ctx, &sub)
	return CachedCallWorkflowStarted(ctx, sub)
}

// CachedCallWorkflowStarted delivers one cached call started with its
// submission as the input (contract.WorkflowCachedCallStarted): it retries
// the call on its site at the definition's fixed interval until it is
// delivered or parks, then waits for an operator's retry or discard. The
// site's tracking row is the record: every attempt and every operator
// action is written there by a site activity, and reaches central's
// site_calls through telemetry.
func CachedCallWorkflowStarted(ctx workflow.Context, sub contract.CachedCallSubmission) (contract.CachedCallState, error) {
	// A site of an earlier version may still signal a submit to it.
	operation.IgnoreDuplicateSubmits(ctx)

	c := &cachedCall{sub: sub, state: contract.TrackedOperation{
		OperationID: sub.OperationID, Kind: sub.Kind, Target: sub.Target, Status: contract.StatusPending, RetryCount: sub.RetryCount,
		LastError: sub.LastError, SourceSiteID: sub.SiteID, CreatedAt: sub.CreatedAt, LastAttemptAt: sub.LastAttemptAt,
	}}
	if sub.Status != "" {
		c.state.Status = sub.Status
	}
	if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.CachedCallState, error) {
		return c.answer(), nil
	}); err != nil {
		return contract.CachedCallState{}, fmt.Errorf("register status query: %w", err)
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
	ctx = operation.AfterCancel(ctx)
	in := contract.ResolveParkedCallInput{OperationID: c.state.OperationID, Action: operation.CancelledAction, Cancelled: true}
	if err := c.onSite(ctx, siteActs.ResolveParkedCall, in); err != nil {
		return err
	}
	c.lastAction = &operation.CancelledAction
	c.operatorActions++
	return auditOperatorAction(ctx, contract.OperatorActionAudit{
		OperationID: c.state.OperationID, Kind: c.sub.Kind, SiteID: c.sub.SiteID,
		Action: operation.CancelledAction, Seq: c.operatorActions, Status: c.state.Status,
	})
}

type cachedCall struct {
	sub   contract.CachedCallSubmission
	state contract.TrackedOperation
	// lastAction is the last operator action, who and why.
	lastAction *contract.OperatorAction
	// operatorActions counts this run's operator actions, for the audit log.
	operatorActions int
}

// waitFirstRetry keeps the fixed interval between the site's last attempt
// (its immediate attempt, or its own last retry while central was away) and
// the next retry, or the longer wait the target asked for (no wait when the
// hand-off came later).
func (c *cachedCall) waitFirstRetry(ctx workflow.Context) error {
	if c.sub.LastAttemptAt == nil || c.sub.Status == contract.StatusParked {
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

func (c *cachedCall) answer() contract.CachedCallState {
	return contract.CachedCallState{TrackedOperation: c.state, LastOperatorAction: c.lastAction, Request: c.sub.Request}
}

func (c *cachedCall) run(ctx workflow.Context) error {
	retryCh := workflow.GetSignalChannel(ctx, contract.SignalRetry)
	discardCh := workflow.GetSignalChannel(ctx, contract.SignalDiscard)
	// A call the site parked before central took it over shows Parked from
	// its start: an operator's action sent from then on is not stale.
	parkedFromStart := c.sub.Status == contract.StatusParked
	for {
		if err := c.retryUntilSettled(ctx); err != nil || c.state.Status != contract.StatusParked {
			return err
		}
		if !parkedFromStart {
			operation.DrainStaleSignals(retryCh, discardCh)
		}
		parkedFromStart = false
		action, retry := operation.WaitForOperator(ctx, retryCh, discardCh)
		cancelled := ctx.Err() != nil
		ctx = operation.AfterCancel(ctx) // a cancel is a discard, applied like one
		workflow.GetLogger(ctx).Info("operator action on parked call",
			"retry", retry, "operator", action.Operator, "reason", action.Reason)
		in := contract.ResolveParkedCallInput{OperationID: c.state.OperationID, Retry: retry, Action: action, Cancelled: cancelled}
		if err := c.onSite(ctx, siteActs.ResolveParkedCall, in); err != nil {
			return err
		}
		c.lastAction = &action
		c.operatorActions++
		if err := auditOperatorAction(ctx, contract.OperatorActionAudit{
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
		in := contract.DeliverCachedCallInput{OperationID: c.state.OperationID, RetryCount: c.state.RetryCount, Policy: c.sub.Policy}
		if err := c.onSite(ctx, siteActs.DeliverCachedCall, in); err != nil {
			return err
		}
		if !callstate.Retryable(c.state.Status) {
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
// recognises an attempt it already recorded. A site that heartbeats says so
// in the policy it handed off (HeartbeatTimeout): an attempt lost with its
// daemon is then tried again, by the standby taking over or the daemon
// restarted, within that timeout rather than the attempt's.
func (c *cachedCall) onSite(ctx workflow.Context, activity any, in any) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           contract.SiteTaskQueue(c.sub.SiteID),
		StartToCloseTimeout: c.sub.Policy.AttemptTimeout,
		HeartbeatTimeout:    c.sub.Policy.HeartbeatTimeout,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: c.sub.Policy.Interval, BackoffCoefficient: 1, MaximumInterval: c.sub.Policy.Interval,
		},
	})
	var row contract.TrackedOperation
	if err := workflow.ExecuteActivity(ctx, activity, in).Get(ctx, &row); err != nil {
		return fmt.Errorf("call %s on site %s: %w", c.state.OperationID, c.sub.SiteID, err)
	}
	c.state = row
	operation.SetDetails(ctx, row.Status, row.RetryCount, row.LastError)
	return operation.SetStatusAttr(ctx, row.Status, operation.TaskGeneration(ctx))
}
