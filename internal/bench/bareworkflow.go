package bench

import (
	"context"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/notification"
)

// bareTaskQueue is the bare baseline's own task queue.
const bareTaskQueue = "outpost-bench-bare"

// BareInput is one bare notification email.
type BareInput struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// BareWorkflow is the end-to-end baseline: one activity that sends one
// email, and nothing else (no central row, no search attributes, no
// audit). Deterministic, like the workflows package.
func BareWorkflow(ctx workflow.Context, in BareInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var a *BareActivities
	return workflow.ExecuteActivity(ctx, a.SendEmail, in).Get(ctx, nil)
}

// BareLocalWorkflow is the end-to-end baseline of the same shape as a
// notification of generation 4, whose first attempt is a local activity:
// one local activity that sends the email, and nothing else. Against it,
// the end-to-end figure shows what the site path's own work costs (site
// store, forwarder, central row and audit, search attributes) beside the
// Temporal work of one delivery.
func BareLocalWorkflow(ctx workflow.Context, in BareInput) error {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
	var a *BareActivities
	return workflow.ExecuteLocalActivity(ctx, a.SendEmail, in).Get(ctx, nil)
}

// BareLocalLikeNotificationWorkflow is BareLocalWorkflow with a
// notification's Temporal footprint: started with the forwarder's start
// options (its four search attributes, its summary) and the submission as
// input, its local activity answering what a notification's first attempt
// answers, and the workflow returning the state a delivered notification
// returns. Against it, the end-to-end figure shows what Outpost's own work
// costs (site store, forwarder, central row and audit) beside exactly the
// Temporal work of one delivered notification; BareLocalWorkflow beside it
// shows what the start attributes and payloads cost the server.
func BareLocalLikeNotificationWorkflow(ctx workflow.Context, sub contract.NotificationSubmission) (contract.NotificationState, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute})
	var a *BareActivities
	var res contract.RecordAndDeliverResult
	if err := workflow.ExecuteLocalActivity(ctx, a.SendLikeFirstAttempt, sub).Get(ctx, &res); err != nil {
		return contract.NotificationState{}, err
	}
	state := res.Recorded.State
	state.Status, state.ResolvedTargets = contract.StatusDelivered, res.Delivery.ResolvedTargets
	state.LastAttemptAt, state.DeliveredAt = &res.Delivery.DeliveredAt, &res.Delivery.DeliveredAt
	return state, nil
}

// BareActivities sends the bare baseline's email with the central worker's
// mailer, to the same recipients.
type BareActivities struct {
	Mailer *notification.Mailer
	To     []string
	// Policy is the central worker's retry policy, which
	// SendLikeFirstAttempt answers as the recorded row's.
	Policy contract.RetryPolicy
}

// SendEmail sends one email.
func (a *BareActivities) SendEmail(ctx context.Context, in BareInput) error {
	return a.Mailer.Send(ctx, notification.Email{ID: in.ID, To: a.To, Subject: in.Subject, Body: in.Body})
}

// SendLikeFirstAttempt sends the submission's email and answers what
// RecordAndDeliverNotification answers for a delivered first attempt,
// without a central row.
func (a *BareActivities) SendLikeFirstAttempt(ctx context.Context, sub contract.NotificationSubmission) (contract.RecordAndDeliverResult, error) {
	created := time.Now()
	if err := a.Mailer.Send(ctx, notification.Email{ID: sub.NotificationID, To: a.To, Subject: sub.Subject, Body: sub.Body}); err != nil {
		return contract.RecordAndDeliverResult{}, err
	}
	return contract.RecordAndDeliverResult{
		Recorded: contract.RecordNotificationResult{
			State: contract.NotificationState{NotificationID: sub.NotificationID, Status: contract.StatusPending,
				SiteEnqueuedAt: sub.SiteEnqueuedAt, CreatedAt: created},
			Policy: a.Policy,
		},
		Delivery: &contract.DeliverNotificationResult{DeliveredAt: time.Now(), ResolvedTargets: a.To},
	}, nil
}
