package bench

import (
	"context"
	"time"

	"go.temporal.io/sdk/workflow"

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

// BareActivities sends the bare baseline's email with the central worker's
// mailer, to the same recipients.
type BareActivities struct {
	Mailer *notification.Mailer
	To     []string
}

// SendEmail sends one email.
func (a *BareActivities) SendEmail(ctx context.Context, in BareInput) error {
	return a.Mailer.Send(ctx, notification.Email{ID: in.ID, To: a.To, Subject: in.Subject, Body: in.Body})
}
