package sitedaemon

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
)

// workerIdentity names this daemon's poller on the site's task queue,
// unique to this run: two daemons on one host or with one node name still
// tell apart, and a restarted daemon is not taken for another.
func workerIdentity(siteID, node string) string {
	return fmt.Sprintf("outpost-site %s node %s run %s", siteID, node, uuid.NewString()[:8])
}

// pollerWatch looks for other daemons polling this site's task queue. Two
// daemons with one site id share the queue, and each gets tasks for
// operations only the other holds; the retries still reach the right one,
// but an operator must be told.
type pollerWatch struct {
	tc       client.Client
	siteID   string
	identity string
	since    time.Time // pollers last seen before this are earlier runs
	others   prometheus.Gauge
	log      *zap.Logger
	reported []string
}

var otherPollersDesc = "Other pollers seen on this site's task queue: another daemon runs with this site id (should be 0)."

func newPollerWatch(tc client.Client, siteID, identity string, log *zap.Logger) *pollerWatch {
	return &pollerWatch{tc: tc, siteID: siteID, identity: identity, since: time.Now(), log: log,
		others: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outpost_site_other_pollers", Help: otherPollersDesc})}
}

// run checks every interval until ctx ends.
func (p *pollerWatch) run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := p.check(ctx); err != nil && ctx.Err() == nil {
				p.log.Debug("cannot list the site task queue's pollers", zap.Error(err))
			}
		}
	}
}

// check lists the pollers and reports any other than this daemon.
func (p *pollerWatch) check(ctx context.Context) error {
	queue := contract.SiteTaskQueue(p.siteID)
	resp, err := p.tc.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return fmt.Errorf("describe task queue %s: %w", queue, err)
	}
	var others []string
	for _, poller := range resp.GetPollers() {
		if poller.GetIdentity() != p.identity && !poller.GetLastAccessTime().AsTime().Before(p.since) {
			others = append(others, poller.GetIdentity())
		}
	}
	slices.Sort(others)
	p.others.Set(float64(len(others)))
	if len(others) > 0 && !slices.Equal(others, p.reported) {
		p.log.Error("another daemon polls this site's task queue: two daemons share site id "+p.siteID+
			"; each gets retries for operations only the other holds (they are retried until the right one takes them). "+
			"Give each site its own site.id, or stop the extra daemon",
			zap.String("taskQueue", queue), zap.String("self", p.identity), zap.Strings("others", others))
	}
	p.reported = others
	return nil
}
