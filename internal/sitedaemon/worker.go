package sitedaemon

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/temporalclient"
)

// runWorker serves the site's task queue (cached-call deliveries, operator
// actions, reconciliation pulls) and makes sure central reconciles this
// site. Central may be down when the site starts: it keeps trying every
// retry interval, and the site works meanwhile.
func runWorker(ctx context.Context, tc client.Client, siteID, identity string, acts *onsite.SiteActivities,
	reconcileEvery, retry time.Duration, log *zap.Logger) error {
	var w worker.Worker
	for {
		err := startWorker(tc, siteID, identity, acts, &w)
		if err == nil {
			err = ensureReconcileSchedule(ctx, tc, siteID, reconcileEvery)
		}
		if err == nil {
			break
		}
		log.Warn("site worker cannot reach central yet; retrying", zap.Duration("every", retry), zap.Error(err))
		select {
		case <-ctx.Done():
			stopWorker(w)
			return nil
		case <-time.After(retry):
		}
	}
	log.Info("site worker serving", zap.String("taskQueue", contract.SiteTaskQueue(siteID)))
	<-ctx.Done()
	stopWorker(w)
	return nil
}

// startWorker starts *w unless it is already running (a worker that failed
// to start is replaced by a fresh one).
func startWorker(tc client.Client, siteID, identity string, acts *onsite.SiteActivities, w *worker.Worker) error {
	if *w != nil {
		return nil
	}
	candidate := worker.New(tc, contract.SiteTaskQueue(siteID), worker.Options{Identity: identity})
	candidate.RegisterActivity(acts)
	if err := candidate.Start(); err != nil {
		return fmt.Errorf("start worker on %s: %w", contract.SiteTaskQueue(siteID), err)
	}
	*w = candidate
	return nil
}

func stopWorker(w worker.Worker) {
	if w != nil {
		w.Stop()
	}
}

// ensureReconcileSchedule creates the schedule that runs
// ReconcileSiteWorkflow for this site every interval, or brings an existing
// one's interval and action in line with the config.
func ensureReconcileSchedule(ctx context.Context, tc client.Client, siteID string, every time.Duration) error {
	id := contract.ReconcileScheduleID(siteID)
	return temporalclient.EnsureSchedule(ctx, tc, client.ScheduleOptions{
		ID:      id,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}},
		Overlap: enums.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID:        id,
			Workflow:  contract.WorkflowReconcileSite,
			Args:      []any{contract.ReconcileInput{SiteID: siteID}},
			TaskQueue: contract.CentralTaskQueue,
		},
		Note: "Pulls tracking rows changed on site " + siteID + " into central's site_calls; trigger it to reconcile now.",
	})
}
