package sitedaemon

import (
	"context"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// localRetryParallelism bounds the retries the site makes at once while
// central is away; a slow target holds up at most that many.
const localRetryParallelism = 8

// runLocalRetries retries, every poll, the cached calls central has not
// taken over whose next retry is due: a site keeps delivering to its own
// targets (the historian on the LAN, the ERP next door) while central or
// the WAN is down, and parks what never succeeds. Once a hand-off is
// acknowledged the call's workflow drives it, from the state the site
// reached (the hand-off carries it).
func runLocalRetries(ctx context.Context, store *sitestore.Store, acts *onsite.SiteActivities, poll time.Duration, log *zap.Logger) error {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		retryDueOnSite(ctx, store, acts, log)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// retryDueOnSite makes one pass over the calls due on the site.
func retryDueOnSite(ctx context.Context, store *sitestore.Store, acts *onsite.SiteActivities, log *zap.Logger) {
	due, err := store.DueOnSite(ctx, time.Now(), 100)
	if err != nil {
		if ctx.Err() == nil {
			log.Error("read calls due on the site", zap.Error(err))
		}
		return
	}
	var g errgroup.Group
	g.SetLimit(localRetryParallelism)
	for _, row := range due {
		g.Go(func() error {
			after, err := acts.RetryOnSite(ctx, row.OperationID)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Error("retry on the site", zap.String("operation", row.OperationID), zap.Error(err))
			case after.Status == contract.StatusParked && row.Status != contract.StatusParked:
				log.Warn("cached call parked on the site: retries used up while central was unreachable; an operator retries or discards it once central has it",
					zap.String("operation", row.OperationID), zap.String("target", row.Target), zap.String("lastError", after.LastError))
			}
			return nil
		})
	}
	_ = g.Wait() // each retry logs its own failure
}
