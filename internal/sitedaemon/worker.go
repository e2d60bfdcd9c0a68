package sitedaemon

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	activityheartbeat "github.com/outpost-dev/outpost/activities/heartbeat"
	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/schedule"
)

// siteWorker is the site's Temporal worker (cached-call deliveries,
// operator actions, reconciliation pulls), run under the identity of this
// daemon's role or not at all (siteHold.pollAs).
type siteWorker struct {
	tc             client.Client
	siteID         string
	region         contract.Region
	acts           *onsite.SiteActivities
	reconcileEvery time.Duration
	log            *zap.Logger
	w              worker.Worker
	identity       string
	scheduled      bool // the reconcile schedule is in line with the config
}

// workerRole says under which identity the site worker polls, if at all
// (pollAs), and looks again at who holds the site (check).
type workerRole interface {
	pollAs(ctx context.Context) (daemonIdentity, bool)
	check(ctx context.Context)
}

// runWorker keeps the worker in line with the daemon's role: every check
// interval it checks who holds the site (siteHold.check), then runs the
// worker under the identity of its role, or stops it. Central may be down
// when the site starts: a worker that cannot start is tried again every
// retry interval, and the site works meanwhile.
func runWorker(ctx context.Context, sw *siteWorker, hold workerRole, every, retry time.Duration) error {
	defer sw.stop()
	for {
		wait := every
		if err := sw.align(ctx, hold); err != nil {
			sw.log.Warn("site worker cannot reach central yet; retrying", zap.Duration("every", retry), zap.Error(err))
			wait = min(every, retry)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		hold.check(ctx)
	}
}

// align starts, restarts under a new identity or stops the worker as the
// daemon's role asks, and makes sure central reconciles this site.
func (s *siteWorker) align(ctx context.Context, hold workerRole) error {
	identity, poll := hold.pollAs(ctx)
	if !poll {
		if s.w != nil {
			s.log.Info("site worker stopped: this daemon waits and holds no unsettled cached call", zap.String("identity", s.identity))
		}
		s.stop()
		return nil
	}
	if s.w == nil || s.identity != identity.String() {
		s.stop()
		if err := s.start(identity.String()); err != nil {
			return err
		}
	}
	if !s.scheduled {
		if err := ensureReconcileSchedule(ctx, s.tc, s.siteID, s.region, s.reconcileEvery); err != nil {
			return err
		}
		s.scheduled = true
	}
	return nil
}

// start runs a fresh worker under identity (one that failed to start is
// dropped).
func (s *siteWorker) start(identity string) error {
	queue := contract.SiteTaskQueue(s.siteID)
	// Attempts heartbeat every heartbeat.Every: send each one, not one per
	// 0.8 × heartbeat.Timeout (the SDK's batching).
	candidate := worker.New(s.tc, queue, worker.Options{Identity: identity, MaxHeartbeatThrottleInterval: activityheartbeat.Every})
	candidate.RegisterActivity(s.acts)
	if err := candidate.Start(); err != nil {
		return fmt.Errorf("start worker on %s as %q: %w", queue, identity, err)
	}
	s.w, s.identity = candidate, identity
	s.log.Info("site worker serving", zap.String("taskQueue", queue), zap.String("identity", identity))
	return nil
}

func (s *siteWorker) stop() {
	if s.w != nil {
		s.w.Stop()
		s.w, s.identity = nil, ""
	}
}

// ensureReconcileSchedule creates the schedule that runs
// ReconcileSiteWorkflow for this site every interval, or brings an existing
// one's interval and action in line with the config.
func ensureReconcileSchedule(ctx context.Context, tc client.Client, siteID string, region contract.Region, every time.Duration) error {
	id := contract.ReconcileScheduleID(siteID)
	// The schedule's runs are the region's work: its queue, its OutpostRegion.
	start := InRegion(client.StartWorkflowOptions{TaskQueue: contract.CentralTaskQueue}, region)
	return schedule.Ensure(ctx, tc, client.ScheduleOptions{
		ID:      id,
		Spec:    client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}},
		Overlap: enums.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action: &client.ScheduleWorkflowAction{
			ID:                    id,
			Workflow:              contract.WorkflowReconcileSite,
			Args:                  []any{contract.ReconcileInput{SiteID: siteID}},
			TaskQueue:             start.TaskQueue,
			TypedSearchAttributes: start.TypedSearchAttributes,
		},
		Note: "Pulls tracking rows changed on site " + siteID + " into central's site_calls; trigger it to reconcile now.",
	})
}
