package sitedaemon

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// purgeBatch bounds one purge transaction, so scripts' writes never wait long.
const purgeBatch = 1000

// runPurge deletes terminal tracking rows older than retention every
// interval, on its own: it needs nothing from central.
func runPurge(ctx context.Context, store *sitestore.Store, retention, interval time.Duration, now func() time.Time, log *zap.Logger) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		n, err := purgeTerminal(ctx, store, now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("purge tracking rows", zap.Error(err))
		case n > 0:
			log.Info("purged terminal tracking rows", zap.Int("rows", n), zap.Duration("retention", retention))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func purgeTerminal(ctx context.Context, store *sitestore.Store, cutoff time.Time) (int, error) {
	total := 0
	for {
		n, err := store.PurgeTerminal(ctx, cutoff, purgeBatch)
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}
