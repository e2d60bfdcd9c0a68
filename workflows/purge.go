package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
)

// purgeCallsPerRun bounds one run: each activity call deletes a bounded
// number of batches, and a backlog larger than this many calls is left to
// the next run.
const purgeCallsPerRun = 50

// PurgeWorkflow deletes central rows past their retention: terminal
// notifications and site_calls rows, and old audit_log rows. Non-terminal
// rows are never deleted. The retention and batch size are the central
// worker's config; the activity reads its clock, so a run decides its
// cutoffs when it runs.
func PurgeWorkflow(ctx workflow.Context) (contract.PurgeResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Hour,
		// The activity heartbeats after every batch.
		HeartbeatTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: 30 * time.Second, BackoffCoefficient: 1, MaximumAttempts: 5,
		},
	})
	var total contract.PurgeResult
	for range purgeCallsPerRun {
		var res contract.PurgeResult
		if err := workflow.ExecuteActivity(ctx, purgeActs.PurgeCentralStore).Get(ctx, &res); err != nil {
			return total, fmt.Errorf("purge central store: %w", err)
		}
		total.Notifications += res.Notifications
		total.SiteCalls += res.SiteCalls
		total.AuditLog += res.AuditLog
		total.More = res.More
		if !res.More {
			break
		}
	}
	return total, nil
}
