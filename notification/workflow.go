package notification

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/activities/heartbeat"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/callstate"
	"github.com/outpost-dev/outpost/temporalcontract"
	"github.com/outpost-dev/outpost/workflows/operation"
)

// changeRecordInFirstAttempt versions how Workflow starts: from version 1
// its first delivery attempt records the central row too
// (RecordAndDeliverNotification), one billable action less per
// notification than the local activity that recorded it before the attempt
// (DefaultVersion, which the workflows started before still replay).
// Workers of generation 2 (operation.WorkerBuildID) no longer ask: every
// notification they start takes version 1's path.
const changeRecordInFirstAttempt = "record-in-first-attempt"

// generationFirstAttemptLocal is the first generation whose notifications
// make their first attempt (RecordAndDeliverNotification) as a local
// activity, in the workflow task that starts them: no activity task to
// schedule, match and dispatch, and a delivered notification's history
// is one workflow task of 7 events instead of two tasks and an activity,
// 12 events. That halves what a notification costs the Temporal server.
const generationFirstAttemptLocal = 4

// versionMarkersRetired reports whether the current workflow task was (or,
// replaying, is recorded as) completed by a worker that takes, without
// recording a check, every path a version check at a notification's start
// would choose: one of generation 2 or later.
func versionMarkersRetired(generation int) bool { return generation >= 2 }

// firstAttemptLocal reports whether a notification whose first task a
// worker of generation completed makes its first attempt as a local
// activity.
func firstAttemptLocal(generation int) bool { return generation >= generationFirstAttemptLocal }

// acts are the activities the workflow calls, named by method value on a
// nil receiver: the central worker registers the real ones, and an
// activity's name is its method's name.
var acts *Activities

// Workflow is the notification's workflow, registered under
// contract.WorkflowNotification (Run) and
// contract.WorkflowNotificationStarted (RunStarted), on a central worker
// whose delivery attempts take up to AttemptTimeout.
type Workflow struct {
	// AttemptTimeout bounds a notification's first delivery attempt: the
	// worker's retry policy's. That attempt runs before the workflow has
	// the policy in force, which the row it records returns. Nothing but
	// the attempt's StartToClose timeout uses it, and Temporal does not
	// compare timeouts on replay, so a worker with another configuration
	// replays the same history; what follows the attempt (retries,
	// interval, later attempts' timeouts) is decided by the recorded policy.
	AttemptTimeout time.Duration
}

// Run delivers one notification handed off by SignalWithStart
// (contract.WorkflowNotification): it waits for the submit signal, then
// goes on as RunStarted.
func (w Workflow) Run(ctx workflow.Context) (contract.NotificationState, error) {
	return w.run(ctx, operation.TaskGeneration)
}

// RunStarted delivers one notification started with its submission as the
// input (contract.WorkflowNotificationStarted): record the central row,
// deliver with fixed-interval retry, park, then wait for retry or discard.
func (w Workflow) RunStarted(ctx workflow.Context, sub contract.NotificationSubmission) (contract.NotificationState, error) {
	return w.runStarted(ctx, sub, operation.TaskGeneration)
}

// run is Run with the generation of the worker that takes a
// notification's first task (operation.TaskGeneration): the tests run it
// as the workers of earlier generations would.
func (w Workflow) run(ctx workflow.Context, generation func(workflow.Context) int) (contract.NotificationState, error) {
	var sub contract.NotificationSubmission
	workflow.GetSignalChannel(ctx, contract.SignalSubmit).Receive(ctx, &sub)
	operation.IgnoreDuplicateSubmits(ctx)
	return w.deliverSubmission(ctx, sub, generation)
}

// runStarted is RunStarted with the generation of the worker that takes
// its first task, as run.
func (w Workflow) runStarted(ctx workflow.Context, sub contract.NotificationSubmission,
	generation func(workflow.Context) int) (contract.NotificationState, error) {
	// A site of an earlier version may still signal a submit to it.
	operation.IgnoreDuplicateSubmits(ctx)
	return w.deliverSubmission(ctx, sub, generation)
}

// deliverSubmission is a notification's life from its submission on. How
// it starts depends on the generation of the worker that completed (or
// completes) the task it starts in (see operation.WorkerBuildID).
func (w Workflow) deliverSubmission(ctx workflow.Context, sub contract.NotificationSubmission,
	generation func(workflow.Context) int) (contract.NotificationState, error) {
	// Pending from the first moment: the status query must not answer a
	// zero state while the central row is being written.
	n := &notificationRun{siteID: sub.SourceSiteID, generation: generation, state: contract.NotificationState{
		NotificationID: sub.NotificationID, Status: contract.StatusPending, SiteEnqueuedAt: sub.SiteEnqueuedAt,
	}}
	if err := workflow.SetQueryHandler(ctx, contract.QueryStatus, func() (contract.NotificationState, error) {
		return n.state, nil
	}); err != nil {
		return contract.NotificationState{}, fmt.Errorf("register status query: %w", err)
	}
	// A worker of generation 2 or later always records in the first attempt
	// and skips the check: its marker's search-attribute upsert would cost a
	// visibility write per notification (see operation.WorkerBuildID).
	g := generation(ctx)
	if versionMarkersRetired(g) || workflow.GetVersion(ctx, changeRecordInFirstAttempt, workflow.DefaultVersion, 1) == 1 {
		return n.recordInFirstAttempt(ctx, sub, w.AttemptTimeout, firstAttemptLocal(g))
	}
	if err := n.record(ctx, sub); err != nil {
		return contract.NotificationState{}, err
	}
	return n.afterRecord(ctx)
}

// record writes the central row unless it exists and takes the stored
// row's state and the policy in force. The write retries until the store
// answers, and completes even if a cancel request arrives meanwhile: a
// cancelled notification ends as a Discarded row, so the row must exist.
func (n *notificationRun) record(ctx workflow.Context, sub contract.NotificationSubmission) error {
	var recorded contract.RecordNotificationResult
	recordCtx, _ := workflow.NewDisconnectedContext(ctx)
	if err := operation.StoreWrite(recordCtx, acts.RecordNotification, sub, &recorded); err != nil {
		return fmt.Errorf("record notification %s: %w", sub.NotificationID, err)
	}
	n.takeRecorded(recorded)
	return nil
}

func (n *notificationRun) takeRecorded(recorded contract.RecordNotificationResult) {
	n.state, n.policy = recorded.State, recorded.Policy
}

// afterRecord delivers a notification whose central row is recorded, from
// the state the row has.
func (n *notificationRun) afterRecord(ctx workflow.Context) (contract.NotificationState, error) {
	if n.state.Status.Terminal() {
		// A resubmit of a notification central already finished: never deliver twice.
		return n.state, n.setStatusAttr(ctx)
	}
	if n.state.Status != contract.StatusPending {
		// An earlier run, or this run's first workflow task lost with its
		// worker after it recorded a failed attempt, left it Retrying or
		// Parked: restart its cycle cleanly, numbering attempts after the
		// failed ones the row counts, whose audit events are stored (an
		// attempt numbered again would be stored as the one before).
		n.attempts = max(n.attempts, n.state.RetryCount)
		if err := n.update(ctx, contract.NotificationUpdate{Status: contract.StatusPending, LastError: n.state.LastError}); err != nil || n.finished() {
			return n.endCancelled(ctx, err)
		}
	}
	_, err := n.run(ctx)
	return n.endCancelled(ctx, err)
}

// recordInFirstAttempt makes the first delivery attempt with the activity
// that records the central row before it attempts (a local activity when
// local), then goes on as the outcome says. A first attempt that delivers
// costs no other command than the status upsert.
func (n *notificationRun) recordInFirstAttempt(ctx workflow.Context, sub contract.NotificationSubmission, timeout time.Duration,
	local bool) (contract.NotificationState, error) {
	var res contract.RecordAndDeliverResult
	err := startFirstAttempt(ctx, contract.RecordAndDeliverInput{Submission: sub, Attempt: 1}, timeout, local).Get(ctx, &res)
	switch {
	case rowUnrecorded(err):
		// The store did not answer: nothing recorded, nothing attempted.
		workflow.GetLogger(ctx).Warn("first attempt could not record the central row; recording it", "error", err)
		if err := n.record(ctx, sub); err != nil {
			return contract.NotificationState{}, err
		}
		return n.afterRecord(ctx)
	case err != nil:
		n.attempts++
		return n.afterFailedFirstAttempt(ctx, sub, err)
	case res.Delivery == nil:
		// A previous run's row, not Pending: nothing attempted.
		n.takeRecorded(res.Recorded)
		return n.afterRecord(ctx)
	}
	n.attempts++
	n.takeRecorded(res.Recorded)
	return n.endCancelled(ctx, n.delivered(ctx, *res.Delivery))
}

// afterFailedFirstAttempt handles a failed first attempt as deliver handles
// a failed attempt, with the row and policy the failure carries; when it
// carries none (its outcome was lost: a timeout, a cancel) the workflow
// records the row, which the attempt may or may not have done, and the row
// says what happened: Delivered when the lost attempt delivered.
func (n *notificationRun) afterFailedFirstAttempt(ctx workflow.Context, sub contract.NotificationSubmission, attemptErr error) (contract.NotificationState, error) {
	if recorded, ok := temporalcontract.RecordedBy(attemptErr); ok {
		n.takeRecorded(recorded)
	} else if err := n.record(ctx, sub); err != nil {
		return contract.NotificationState{}, err
	}
	if n.state.Status != contract.StatusPending {
		return n.afterRecord(ctx)
	}
	retry, err := n.failed(ctx, attemptErr)
	if err != nil || n.finished() {
		return n.endCancelled(ctx, err)
	}
	if retry {
		_, err = n.run(ctx)
	} else {
		_, err = n.parked(ctx)
	}
	return n.endCancelled(ctx, err)
}

// startFirstAttempt starts RecordAndDeliverNotification, as a local
// activity when local. Run locally, the attempt takes place in the
// workflow task that starts the notification, and a delivered notification
// completes in that same task. What it gives up is small: while the first
// attempt runs, the Web UI shows no pending activity and a status query
// waits for it (a few milliseconds, at most the attempt's timeout); its
// outcome is in the history's marker. A local activity cannot heartbeat,
// and needs not: a worker that dies during the attempt is replaced when
// the workflow task times out (10 s, as an ordinary attempt's heartbeat
// timeout), and the retried attempt finds the row as the lost one left it,
// as an ordinary activity's retry would.
func startFirstAttempt(ctx workflow.Context, in contract.RecordAndDeliverInput, timeout time.Duration, local bool) workflow.Future {
	if !local {
		return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, attemptOptions(timeout)),
			acts.RecordAndDeliverNotification, in)
	}
	return workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: timeout, StartToCloseTimeout: timeout, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	}), acts.RecordAndDeliverNotification, in)
}

// rowUnrecorded reports a first attempt that could not record the row.
func rowUnrecorded(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == contract.ErrTypeRowUnrecorded
}

// endCancelled ends a notification a cancel request stopped (err is the
// cancellation) as Discarded: a cancel from the Web UI must not leave the
// row Parked or Retrying with nothing left to act on it. Any other outcome
// stands.
func (n *notificationRun) endCancelled(ctx workflow.Context, err error) (contract.NotificationState, error) {
	if !temporal.IsCanceledError(err) {
		return n.state, err
	}
	workflow.GetLogger(ctx).Info("notification cancelled; discarding it", "notification", n.state.NotificationID)
	n.operatorActions++
	n.state.LastOperatorAction = &operation.CancelledAction
	err = n.update(operation.AfterCancel(ctx), contract.NotificationUpdate{Status: contract.StatusDiscarded, RetryCount: n.state.RetryCount,
		LastError: n.state.LastError, OperatorAction: &operation.CancelledAction, OperatorSeq: n.operatorActions})
	return n.state, err // the state the update left
}

// notificationRun is the workflow's state: a mirror of the central row.
type notificationRun struct {
	state  contract.NotificationState
	policy contract.RetryPolicy
	siteID string
	// attempts and operatorActions count this run's delivery attempts and
	// operator actions; they name the audit events (no extra commands).
	attempts, operatorActions int
	// generation is that of the worker completing the current workflow
	// task (operation.TaskGeneration, or a test's).
	generation func(workflow.Context) int
}

// run delivers, then while the notification is parked waits for the
// operator.
func (n *notificationRun) run(ctx workflow.Context) (contract.NotificationState, error) {
	delivered, err := n.deliver(ctx)
	if err != nil || delivered {
		return n.state, err
	}
	return n.parked(ctx)
}

// parked waits for the operator's retry or discard of the parked
// notification: a retry delivers again, and parks again if that fails; a
// discard ends it.
func (n *notificationRun) parked(ctx workflow.Context) (contract.NotificationState, error) {
	retryCh := workflow.GetSignalChannel(ctx, contract.SignalRetry)
	discardCh := workflow.GetSignalChannel(ctx, contract.SignalDiscard)
	for {
		operation.DrainStaleSignals(retryCh, discardCh)
		action, retry := operation.WaitForOperator(ctx, retryCh, discardCh)
		ctx = operation.AfterCancel(ctx) // a cancel is a discard, written like one
		n.state.LastOperatorAction = &action
		workflow.GetLogger(ctx).Info("operator action on parked notification",
			"retry", retry, "operator", action.Operator, "reason", action.Reason)
		n.operatorActions++
		upd := contract.NotificationUpdate{Status: contract.StatusPending, LastError: n.state.LastError,
			OperatorAction: &action, OperatorSeq: n.operatorActions}
		if !retry {
			upd.Status, upd.RetryCount = contract.StatusDiscarded, n.state.RetryCount
			err := n.update(ctx, upd)
			return n.state, err // the state the update left
		}
		if err := n.update(ctx, upd); err != nil || n.finished() {
			return n.state, err
		}
		delivered, err := n.deliver(ctx)
		if err != nil || delivered {
			return n.state, err
		}
	}
}

// finished reports a terminal state: the central row's, when an update
// found it terminal (adoptTerminalRow).
func (n *notificationRun) finished() bool { return n.state.Status.Terminal() }

// deliver attempts delivery until it succeeds (true) or the notification parks (false).
func (n *notificationRun) deliver(ctx workflow.Context) (bool, error) {
	for {
		res, err := n.attempt(ctx)
		if err == nil {
			return true, n.delivered(ctx, res)
		}
		retry, err := n.failed(ctx, err)
		if err != nil || !retry {
			return n.finished(), err
		}
	}
}

// attempt makes one delivery attempt.
func (n *notificationRun) attempt(ctx workflow.Context) (contract.DeliverNotificationResult, error) {
	n.attempts++
	var res contract.DeliverNotificationResult
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, attemptOptions(n.policy.AttemptTimeout)),
		acts.DeliverNotification, contract.DeliverNotificationInput{
			NotificationID: n.state.NotificationID, RetryCount: n.state.RetryCount, Attempt: n.attempts,
		}).Get(ctx, &res)
	return res, err
}

// attemptOptions run one delivery attempt. Retries are the workflow's own
// loop, so every failed attempt is visible on the row and in OutpostStatus.
// The attempt heartbeats while it works (heartbeat.While): a worker killed
// mid-attempt fails it within heartbeat.Timeout and the next attempt goes
// to another worker, instead of every notification it held waiting out
// timeout (minutes, for a slow relay's final reply). Temporal compares no
// timeouts on replay, so histories recorded without it replay the same.
func attemptOptions(timeout time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{StartToCloseTimeout: timeout, HeartbeatTimeout: heartbeat.Timeout,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}}
}

// failed records a failed attempt on the row: Parked when the failure is
// permanent or the retries are used up, otherwise Retrying, and then waits
// the interval (or the longer delay the receiver asked for). retry is
// false when it parked or the row was found terminal.
func (n *notificationRun) failed(ctx workflow.Context, attemptErr error) (retry bool, err error) {
	now := workflow.Now(ctx)
	n.state.LastAttemptAt = &now
	next := callstate.AfterFailedAttempt(n.state.RetryCount, n.policy.MaxRetries, operation.IsPermanent(attemptErr))
	if next == contract.StatusParked {
		return false, n.update(ctx, contract.NotificationUpdate{Status: contract.StatusParked, RetryCount: n.state.RetryCount,
			LastError: parkReason(attemptErr, n.policy.MaxRetries), Attempt: n.attempts})
	}
	wait := max(n.policy.Interval, askedDelay(attemptErr))
	nextAt := now.Add(wait)
	if err := n.update(ctx, contract.NotificationUpdate{Status: contract.StatusRetrying, RetryCount: n.state.RetryCount + 1,
		LastError: describe(attemptErr), NextAttemptAt: &nextAt, Attempt: n.attempts}); err != nil || n.finished() {
		return false, err
	}
	return true, workflow.Sleep(ctx, wait)
}

// delivered takes a successful delivery as the workflow's state. The
// activity marked the row Delivered with its audit events, unless that
// write failed after the email went out: then the workflow writes both,
// through the store write that retries until the store answers.
func (n *notificationRun) delivered(ctx workflow.Context, res contract.DeliverNotificationResult) error {
	n.state.DeliveredAt, n.state.ResolvedTargets, n.state.LastAttemptAt = &res.DeliveredAt, res.ResolvedTargets, &res.DeliveredAt
	if res.Unrecorded {
		return n.update(ctx, contract.NotificationUpdate{Status: contract.StatusDelivered, RetryCount: n.state.RetryCount,
			DeliveredAt: res.DeliveredAt, ResolvedTargets: res.ResolvedTargets, Attempt: n.attempts})
	}
	n.state.Status, n.state.LastError, n.state.NextAttemptAt = contract.StatusDelivered, "", nil
	return n.setStatusAttr(ctx)
}

// update writes a status change (upd's Status, RetryCount, LastError,
// NextAttemptAt and audit fields) to the central row, then to the
// workflow's state and search attribute.
func (n *notificationRun) update(ctx workflow.Context, upd contract.NotificationUpdate) error {
	upd.NotificationID, upd.LastAttemptAt = n.state.NotificationID, n.state.LastAttemptAt
	upd.SiteID, upd.At = n.siteID, workflow.Now(ctx)
	err := operation.StoreWrite(ctx, acts.UpdateNotification, upd, nil)
	if row, ok := terminalRow(err); ok {
		return n.adoptTerminalRow(ctx, row, upd.Status)
	}
	if err != nil {
		return fmt.Errorf("update notification %s to %s: %w", n.state.NotificationID, upd.Status, err)
	}
	n.state.Status, n.state.RetryCount, n.state.LastError, n.state.NextAttemptAt = upd.Status, upd.RetryCount, upd.LastError, upd.NextAttemptAt
	return n.setStatusAttr(ctx)
}

// adoptTerminalRow takes the central row's terminal state as the
// workflow's: the row is the record, and a terminal row never changes. It
// happens when an attempt delivered the email and marked the row Delivered
// but its completion was lost (the worker or Temporal died after the
// send): the workflow saw a timeout and tried to record Retrying.
func (n *notificationRun) adoptTerminalRow(ctx workflow.Context, row contract.NotificationState, wanted contract.Status) error {
	workflow.GetLogger(ctx).Info("central row already terminal; taking its state",
		"notification", n.state.NotificationID, "row", row.Status, "wanted", wanted)
	action := n.state.LastOperatorAction
	n.state = row
	n.state.LastOperatorAction = action
	return n.setStatusAttr(ctx)
}

// terminalRow is the row state carried by a TerminalRow failure.
func terminalRow(err error) (contract.NotificationState, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != contract.ErrTypeTerminalRow || !appErr.HasDetails() {
		return contract.NotificationState{}, false
	}
	var row contract.NotificationState
	if appErr.Details(&row) != nil || !row.Status.Terminal() {
		return contract.NotificationState{}, false
	}
	return row, true
}

func (n *notificationRun) setStatusAttr(ctx workflow.Context) error {
	operation.SetDetails(ctx, n.state.Status, n.state.RetryCount, n.state.LastError)
	return operation.SetStatusAttr(ctx, n.state.Status, n.generation(ctx))
}

// askedDelay is how long the receiver asked to wait before the next
// attempt (a Teams or webhook Retry-After); 0 when it did not ask.
func askedDelay(err error) time.Duration {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.NextRetryDelay()
	}
	return 0
}

// describe is the activity's own message, without Temporal's wrapping. An
// attempt that outlived its StartToClose timeout ends either way, whichever
// comes first (under load either does): Temporal's timer fires (a
// TimeoutError), or the attempt returns its context's deadline error.
// Both read "timed out". An attempt whose worker stopped heartbeating
// reads "lost".
func describe(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if appErr.Type() == temporalcontract.DeadlineExceededType {
			return "delivery attempt timed out: " + appErr.Message()
		}
		return appErr.Message()
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) && timeoutErr.TimeoutType() == enumspb.TIMEOUT_TYPE_HEARTBEAT {
		return "delivery attempt lost: its worker stopped heartbeating (killed, stopped or cut off from Temporal): " + timeoutErr.Error()
	}
	if errors.As(err, &timeoutErr) {
		return "delivery attempt timed out: " + timeoutErr.Error()
	}
	return err.Error()
}

func parkReason(err error, maxRetries int) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == contract.ErrTypeUncertain {
		return describe(err)
	}
	if operation.IsPermanent(err) {
		return "permanent failure: " + describe(err)
	}
	return fmt.Sprintf("retries exhausted (%d): %s", maxRetries, describe(err))
}
