package sitedaemon

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// purgeBatch bounds one purge transaction, so scripts' writes never wait long.
const purgeBatch = 1000

// runPurge, every interval, deletes what the site keeps only for a while:
// terminal tracking rows older than retention, the acknowledged front of
// the job log (entries settled by an air-gap receipt once they are older
// than retention: the site's status answers from them until then) and
// idempotency keys older than retention. It needs nothing from central.
func runPurge(ctx context.Context, store *sitestore.Store, retention, interval time.Duration, now func() time.Time, log *zap.Logger) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	log = log.With(zap.Duration("retention", retention))
	for {
		purgeOnce(ctx, store, now().Add(-retention), log)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// purgeOnce runs each purge with cutoff, logging what it removed; a purge
// that fails is logged and tried again at the next interval.
func purgeOnce(ctx context.Context, store *sitestore.Store, cutoff time.Time, log *zap.Logger) {
	purges := []struct {
		what  string
		purge func(context.Context, time.Time) (int, error)
	}{
		{"terminal tracking rows", func(ctx context.Context, cutoff time.Time) (int, error) { return purgeTerminal(ctx, store, cutoff) }},
		{"acknowledged job-log entries", store.PruneJobLog},
		{"idempotency keys", store.PruneIdempotencyKeys},
	}
	for _, p := range purges {
		n, err := p.purge(ctx, cutoff)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("purge "+p.what, zap.Error(err))
		case n > 0:
			log.Info("purged "+p.what, zap.Int("rows", n))
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
