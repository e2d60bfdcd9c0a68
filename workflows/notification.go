package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// NotificationSubmission is what a site hands to central for one notification:
// the payload of SignalSubmit on workflow NotificationWorkflowID(NotificationID).
type NotificationSubmission struct {
	NotificationID   string    `json:"notificationId"`
	ListName         string    `json:"listName"`
	Subject          string    `json:"subject"`
	Body             string    `json:"body"`
	SourceSiteID     string    `json:"sourceSiteId"`
	SourceNode       string    `json:"sourceNode,omitempty"`
	SourceInstanceID string    `json:"sourceInstanceId,omitempty"`
	SourceScript     string    `json:"sourceScript,omitempty"`
	SiteEnqueuedAt   time.Time `json:"siteEnqueuedAt"`
}

// NotificationState is the central view of one notification: the status
// query's answer and the workflow's result.
type NotificationState struct {
	NotificationID  string    `json:"notificationId"`
	Status          Status    `json:"status"`
	RetryCount      int       `json:"retryCount"`
	LastError       string    `json:"lastError,omitempty"`
	ResolvedTargets []string  `json:"resolvedTargets,omitempty"`
	SiteEnqueuedAt  time.Time `json:"siteEnqueuedAt,omitzero"`
	// CreatedAt is when central recorded it; zero (left out) while the
	// site still holds it.
	CreatedAt     time.Time  `json:"createdAt,omitzero"`
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	DeliveredAt   *time.Time `json:"deliveredAt,omitempty"`
	// LastOperatorAction is the most recent retry or discard applied.
	LastOperatorAction *OperatorAction `json:"lastOperatorAction,omitempty"`
}

// RetryPolicy is a fixed-interval delivery policy: MaxRetries retries after the
// first attempt, Interval apart, then the operation parks.
type RetryPolicy struct {
	Interval   time.Duration `json:"interval"`
	MaxRetries int           `json:"maxRetries"`
	// AttemptTimeout bounds one delivery attempt.
	AttemptTimeout time.Duration `json:"attemptTimeout"`
}

// RecordNotificationResult is the central row as stored (possibly by an
// earlier run) and the retry policy in force for its delivery.
type RecordNotificationResult struct {
	State  NotificationState `json:"state"`
	Policy RetryPolicy       `json:"policy"`
}

// DeliverNotificationInput asks for one delivery attempt.
type DeliverNotificationInput struct {
	NotificationID string `json:"notificationId"`
	// RetryCount is the number of failed attempts before this one in the current cycle.
	RetryCount int `json:"retryCount"`
	// Attempt numbers this attempt among all of the run's attempts, from 1
	// (operator retries do not reset it): it names the attempt's audit event.
	Attempt int `json:"attempt,omitempty"`
}

// DeliverNotificationResult is a successful delivery.
type DeliverNotificationResult struct {
	DeliveredAt     time.Time `json:"deliveredAt"`
	ResolvedTargets []string  `json:"resolvedTargets"`
	// Unrecorded is true when the email went out but the activity could not
	// mark the central row Delivered: the workflow records it instead, for
	// a failed activity would make the workflow send the email again.
	Unrecorded bool `json:"unrecorded,omitempty"`
}

// NotificationUpdate is a status change written to the central row.
type NotificationUpdate struct {
	NotificationID string     `json:"notificationId"`
	Status         Status     `json:"status"`
	RetryCount     int        `json:"retryCount"`
	LastError      string     `json:"lastError,omitempty"`
	LastAttemptAt  *time.Time `json:"lastAttemptAt,omitempty"`
	NextAttemptAt  *time.Time `json:"nextAttemptAt,omitempty"`
	// DeliveredAt and ResolvedTargets go with Status Delivered (required
	// then): a delivery whose activity could not record it.
	DeliveredAt     time.Time `json:"deliveredAt,omitzero"`
	ResolvedTargets []string  `json:"resolvedTargets,omitempty"`

	// The fields below feed the audit log; all are optional.

	// SiteID is the notification's source site.
	SiteID string `json:"siteId,omitempty"`
	// At is when the workflow decided the change (workflow time); a
	// Discarded row's terminal time.
	At time.Time `json:"at,omitzero"`
	// Attempt is the delivery attempt (DeliverNotificationInput.Attempt)
	// whose outcome this change records: a failure, or a delivery the
	// attempt could not record; 0 when it records none.
	Attempt int `json:"attempt,omitempty"`
	// OperatorAction is the operator's retry or discard this change applies.
	OperatorAction *OperatorAction `json:"operatorAction,omitempty"`
	// OperatorSeq numbers the run's operator actions from 1.
	OperatorSeq int `json:"operatorSeq,omitempty"`
}

// Activity names: the activities package implements them and the central
// worker registers them under these names.
const (
	ActivityRecordNotification  = "RecordNotification"
	ActivityDeliverNotification = "DeliverNotification"
	ActivityUpdateNotification  = "UpdateNotification"
)

// Error types that make a delivery failure permanent (no retry: park at once).
const (
	ErrTypeUnknownList  = "UnknownList"
	ErrTypeNoRecipients = "NoRecipients"
	ErrTypeRejected     = "SMTPRejected"
	// ErrTypeUncertain is a send the server may have accepted: it had the
	// whole message and never answered. Sending again could deliver it
	// twice, so it parks for an operator to check and retry or discard.
	ErrTypeUncertain = "DeliveryUncertain"
)

// ErrTypeTerminalRow fails a central-store write that would change a row
// already Delivered or Discarded: no retry can make it. Its details are the
// row's NotificationState, which the workflow adopts.
const ErrTypeTerminalRow = "TerminalRow"

// NotificationWorkflow delivers one notification: record the central row,
// deliver with fixed-interval retry, park, then wait for retry or discard.
func NotificationWorkflow(ctx workflow.Context) (NotificationState, error) {
	var sub NotificationSubmission
	workflow.GetSignalChannel(ctx, SignalSubmit).Receive(ctx, &sub)
	ignoreDuplicateSubmits(ctx)

	// Pending from the first moment: the status query must not answer a
	// zero state while the central row is being written.
	n := &notification{siteID: sub.SourceSiteID, state: NotificationState{
		NotificationID: sub.NotificationID, Status: StatusPending, SiteEnqueuedAt: sub.SiteEnqueuedAt,
	}}
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (NotificationState, error) {
		return n.state, nil
	}); err != nil {
		return NotificationState{}, fmt.Errorf("register status query: %w", err)
	}

	var recorded RecordNotificationResult
	// Recorded even if a cancel request arrives meanwhile: a cancelled
	// notification ends as a Discarded row, so the row must exist.
	recordCtx, _ := workflow.NewDisconnectedContext(ctx)
	if err := storeWrite(recordCtx, ActivityRecordNotification, sub, &recorded); err != nil {
		return NotificationState{}, fmt.Errorf("record notification %s: %w", sub.NotificationID, err)
	}
	n.state, n.policy = recorded.State, recorded.Policy
	if n.state.Status.Terminal() {
		// A resubmit of a notification central already finished: never deliver twice.
		return n.state, n.setStatusAttr(ctx)
	}
	if n.state.Status != StatusPending {
		// A previous run left it Retrying or Parked: restart its cycle cleanly.
		if err := n.update(ctx, NotificationUpdate{Status: StatusPending, LastError: n.state.LastError}); err != nil || n.finished() {
			return n.endCancelled(ctx, err)
		}
	}
	_, err := n.run(ctx)
	return n.endCancelled(ctx, err)
}

// endCancelled ends a notification a cancel request stopped (err is the
// cancellation) as Discarded: a cancel from the Web UI must not leave the
// row Parked or Retrying with nothing left to act on it. Any other outcome
// stands.
func (n *notification) endCancelled(ctx workflow.Context, err error) (NotificationState, error) {
	if !temporal.IsCanceledError(err) {
		return n.state, err
	}
	workflow.GetLogger(ctx).Info("notification cancelled; discarding it", "notification", n.state.NotificationID)
	n.operatorActions++
	n.state.LastOperatorAction = &cancelledAction
	err = n.update(afterCancel(ctx), NotificationUpdate{Status: StatusDiscarded, RetryCount: n.state.RetryCount,
		LastError: n.state.LastError, OperatorAction: &cancelledAction, OperatorSeq: n.operatorActions})
	return n.state, err // the state the update left
}

// notification is the workflow's state: a mirror of the central row.
type notification struct {
	state  NotificationState
	policy RetryPolicy
	siteID string
	// attempts and operatorActions count this run's delivery attempts and
	// operator actions; they name the audit events (no extra commands).
	attempts, operatorActions int
}

func (n *notification) run(ctx workflow.Context) (NotificationState, error) {
	retryCh := workflow.GetSignalChannel(ctx, SignalRetry)
	discardCh := workflow.GetSignalChannel(ctx, SignalDiscard)
	for {
		delivered, err := n.deliver(ctx)
		if err != nil || delivered {
			return n.state, err
		}
		drainStale(retryCh, discardCh)
		action, retry := waitForOperator(ctx, retryCh, discardCh)
		ctx = afterCancel(ctx) // a cancel is a discard, written like one
		n.state.LastOperatorAction = &action
		workflow.GetLogger(ctx).Info("operator action on parked notification",
			"retry", retry, "operator", action.Operator, "reason", action.Reason)
		n.operatorActions++
		upd := NotificationUpdate{Status: StatusPending, LastError: n.state.LastError,
			OperatorAction: &action, OperatorSeq: n.operatorActions}
		if !retry {
			upd.Status, upd.RetryCount = StatusDiscarded, n.state.RetryCount
			err := n.update(ctx, upd)
			return n.state, err // the state the update left
		}
		if err := n.update(ctx, upd); err != nil || n.finished() {
			return n.state, err
		}
	}
}

// finished reports a terminal state: the central row's, when an update
// found it terminal (adoptTerminalRow).
func (n *notification) finished() bool { return n.state.Status.Terminal() }

// deliver attempts delivery until it succeeds (true) or the notification parks (false).
func (n *notification) deliver(ctx workflow.Context) (bool, error) {
	actCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: n.policy.AttemptTimeout,
		// Retries are the workflow's own loop below, so every failed attempt
		// is visible on the row and in OutpostStatus.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	for {
		var res DeliverNotificationResult
		n.attempts++
		err := workflow.ExecuteActivity(actCtx, ActivityDeliverNotification, DeliverNotificationInput{
			NotificationID: n.state.NotificationID, RetryCount: n.state.RetryCount, Attempt: n.attempts,
		}).Get(ctx, &res)
		now := workflow.Now(ctx)
		if err == nil {
			return true, n.delivered(ctx, res)
		}
		n.state.LastAttemptAt = &now
		next := AfterFailedAttempt(n.state.RetryCount, n.policy.MaxRetries, isPermanent(err))
		if next == StatusParked {
			err := n.update(ctx, NotificationUpdate{Status: StatusParked, RetryCount: n.state.RetryCount,
				LastError: parkReason(err, n.policy.MaxRetries), Attempt: n.attempts})
			return n.finished(), err
		}
		nextAt := now.Add(n.policy.Interval)
		if err := n.update(ctx, NotificationUpdate{Status: StatusRetrying, RetryCount: n.state.RetryCount + 1,
			LastError: describe(err), NextAttemptAt: &nextAt, Attempt: n.attempts}); err != nil || n.finished() {
			return n.finished(), err
		}
		if err := workflow.Sleep(ctx, n.policy.Interval); err != nil {
			return false, err
		}
	}
}

// delivered takes a successful delivery as the workflow's state. The
// activity marked the row Delivered with its audit events, unless that
// write failed after the email went out: then the workflow writes both,
// through the store write that retries until the store answers.
func (n *notification) delivered(ctx workflow.Context, res DeliverNotificationResult) error {
	n.state.DeliveredAt, n.state.ResolvedTargets, n.state.LastAttemptAt = &res.DeliveredAt, res.ResolvedTargets, &res.DeliveredAt
	if res.Unrecorded {
		return n.update(ctx, NotificationUpdate{Status: StatusDelivered, RetryCount: n.state.RetryCount,
			DeliveredAt: res.DeliveredAt, ResolvedTargets: res.ResolvedTargets, Attempt: n.attempts})
	}
	n.state.Status, n.state.LastError, n.state.NextAttemptAt = StatusDelivered, "", nil
	return n.setStatusAttr(ctx)
}

// AfterFailedAttempt is the status after a failed attempt, with retries the
// number of retries made so far counting this attempt (0 for a first
// attempt): Parked when the failure is permanent or the retries are used
// up, Retrying otherwise. A notification's first attempt is central's; a
// cached call's is the site's immediate attempt, so its retries start at 1.
func AfterFailedAttempt(retries, maxRetries int, permanent bool) Status {
	if permanent || retries >= maxRetries {
		return StatusParked
	}
	return StatusRetrying
}

// update writes a status change (upd's Status, RetryCount, LastError,
// NextAttemptAt and audit fields) to the central row, then to the
// workflow's state and search attribute.
func (n *notification) update(ctx workflow.Context, upd NotificationUpdate) error {
	upd.NotificationID, upd.LastAttemptAt = n.state.NotificationID, n.state.LastAttemptAt
	upd.SiteID, upd.At = n.siteID, workflow.Now(ctx)
	err := storeWrite(ctx, ActivityUpdateNotification, upd, nil)
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
func (n *notification) adoptTerminalRow(ctx workflow.Context, row NotificationState, wanted Status) error {
	workflow.GetLogger(ctx).Info("central row already terminal; taking its state",
		"notification", n.state.NotificationID, "row", row.Status, "wanted", wanted)
	action := n.state.LastOperatorAction
	n.state = row
	n.state.LastOperatorAction = action
	return n.setStatusAttr(ctx)
}

// terminalRow is the row state carried by a TerminalRow failure.
func terminalRow(err error) (NotificationState, bool) {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrTypeTerminalRow || !appErr.HasDetails() {
		return NotificationState{}, false
	}
	var row NotificationState
	if appErr.Details(&row) != nil || !row.Status.Terminal() {
		return NotificationState{}, false
	}
	return row, true
}

func (n *notification) setStatusAttr(ctx workflow.Context) error {
	setDetails(ctx, n.state.Status, n.state.RetryCount, n.state.LastError)
	if err := workflow.UpsertTypedSearchAttributes(ctx, AttrStatus.ValueSet(string(n.state.Status))); err != nil {
		return fmt.Errorf("set %s: %w", AttrStatus.GetName(), err)
	}
	return nil
}

// setDetails puts why the operation waits in the workflow's current
// details, which the Web UI shows on the workflow page: an operator sees
// "Parked: <last error>" without opening the history. It records nothing
// in the history.
func setDetails(ctx workflow.Context, status Status, retryCount int, lastError string) {
	switch status {
	case StatusParked:
		workflow.SetCurrentDetails(ctx, "Parked: "+lastError+
			"\n\nSend signal retry (deliver again) or discard, input {} or {\"operator\":\"…\",\"reason\":\"…\"}.")
	case StatusRetrying:
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Retrying (%d so far): %s", retryCount, lastError))
	default:
		workflow.SetCurrentDetails(ctx, "")
	}
}

// storeCtx runs short central-store writes as local activities: no extra
// workflow task or history events per write. All of a local activity's
// retries fit in its ScheduleToCloseTimeout (the SDK's default for it is
// StartToClose, spelled out here), so a write still failing after 30 s
// fails: right for writes someone else retries (telemetry's site,
// reconciliation's schedule) or that are best effort (the audit of a cached
// call's operator action). A notification's writes go through storeWrite.
func storeCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 30 * time.Second,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
}

// storeWrite runs a central-store write of a notification until the store
// answers, however long it is away: the site deleted its buffer row on
// central's ack, so a write given up strands the notification. The write
// is a local activity first (the common case costs no history events),
// then, if the store is still failing after storeCtx's 30 s, an ordinary
// activity with no retry limit. Not one long local activity: past the
// workflow task timeout each of its retries records a marker, a timer and a
// workflow task, so an outage of days would take the history to its event
// limit; the server retries an ordinary activity without adding any.
func storeWrite(ctx workflow.Context, activity string, in, out any) error {
	err := workflow.ExecuteLocalActivity(storeCtx(ctx), activity, in).Get(ctx, out)
	if err == nil || isPermanent(err) {
		return err
	}
	workflow.GetLogger(ctx).Warn("central store write failing; retrying until the store answers",
		"activity", activity, "error", err)
	actCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		// No ScheduleToCloseTimeout and no MaximumAttempts: no limit.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	return workflow.ExecuteActivity(actCtx, activity, in).Get(ctx, out)
}

// ignoreDuplicateSubmits consumes later submits: the first one wins.
func ignoreDuplicateSubmits(ctx workflow.Context) {
	workflow.Go(ctx, func(ctx workflow.Context) {
		ch := workflow.GetSignalChannel(ctx, SignalSubmit)
		for {
			ch.Receive(ctx, nil)
			workflow.GetLogger(ctx).Info("duplicate submit ignored")
		}
	})
}

// drainStale drops retry/discard signals sent while the operation was not
// parked, so an old click never acts on a later park.
func drainStale(chs ...workflow.ReceiveChannel) {
	for _, ch := range chs {
		for ch.ReceiveAsync(nil) {
		}
	}
}

// waitForOperator blocks until retry (true) or discard (false) arrives. A
// cancel request (the Web UI's Cancel, `temporal workflow cancel`) is a
// discard too: cancelledAction, with ctx cancelled.
func waitForOperator(ctx workflow.Context, retryCh, discardCh workflow.ReceiveChannel) (OperatorAction, bool) {
	var action OperatorAction
	retry := false
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(retryCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &action); retry = true })
	sel.AddReceive(discardCh, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, &action) })
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) { action = cancelledAction })
	sel.Select(ctx)
	return action, retry
}

// cancelledAction is the discard a cancel request stands for. The request
// carries no operator or reason the workflow can read; the Web UI and the
// temporal CLI record who sent it in the history's WorkflowExecutionCancelRequested event.
var cancelledAction = OperatorAction{Reason: "workflow cancelled (Web UI Cancel or temporal workflow cancel), taken as a discard; " +
	"who asked is in the history's cancel request"}

// afterCancel is a context for the work that ends a cancelled workflow
// properly (the discard's store writes): ctx itself is cancelled, and
// anything run on it would fail at once.
func afterCancel(ctx workflow.Context) workflow.Context {
	if ctx.Err() == nil {
		return ctx
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return dctx
}

func isPermanent(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}

// describe is the activity's own message, without Temporal's wrapping.
func describe(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	var timeoutErr *temporal.TimeoutError
	if errors.As(err, &timeoutErr) {
		return "delivery attempt timed out: " + timeoutErr.Error()
	}
	return err.Error()
}

func parkReason(err error, maxRetries int) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == ErrTypeUncertain {
		return describe(err)
	}
	if isPermanent(err) {
		return "permanent failure: " + describe(err)
	}
	return fmt.Sprintf("retries exhausted (%d): %s", maxRetries, describe(err))
}
