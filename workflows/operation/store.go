package operation

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// StoreContext runs short central-store writes as local activities: no
// extra workflow task or history events per write. All of a local
// activity's retries fit in its ScheduleToCloseTimeout (the SDK's default
// for it is StartToClose, spelled out here), so a write still failing
// after 30 s fails: right for writes someone else retries (telemetry's
// site, reconciliation's schedule) or that are best effort (the audit of a
// cached call's operator action). A notification's writes go through
// StoreWrite.
func StoreContext(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		ScheduleToCloseTimeout: 30 * time.Second,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 30 * time.Second},
	})
}

// StoreWrite runs a central-store write of a notification until the store
// answers, however long it is away: the site deleted its buffer row on
// central's ack, so a write given up strands the notification. The write
// is a local activity first (the common case costs no history events),
// then, if the store is still failing after StoreContext's 30 s, an
// ordinary activity with no retry limit. Not one long local activity: past
// the workflow task timeout each of its retries records a marker, a timer
// and a workflow task, so an outage of days would take the history to its
// event limit; the server retries an ordinary activity without adding any.
func StoreWrite(ctx workflow.Context, activity any, in, out any) error {
	err := workflow.ExecuteLocalActivity(StoreContext(ctx), activity, in).Get(ctx, out)
	if err == nil || IsPermanent(err) {
		return err
	}
	workflow.GetLogger(ctx).Warn("central store write failing; retrying until the store answers", "error", err)
	actCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		// No ScheduleToCloseTimeout and no MaximumAttempts: no limit.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	return workflow.ExecuteActivity(actCtx, activity, in).Get(ctx, out)
}

// IsPermanent reports an activity failure that retrying cannot cure: the
// activity classified it non-retryable.
func IsPermanent(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}
