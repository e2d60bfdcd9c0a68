package site

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// Handoff outcomes, the label of outpost_site_handoffs_total.
const (
	handoffAcked  = "acked"
	handoffFailed = "failed"
	// handoffRefused is a hand-off central refused for good: the row is
	// parked on the site.
	handoffRefused = "refused"
)

// newHandoffCounter counts hand-offs to central by category and outcome:
// its rate is the handoff rate, its failed series the handoff errors.
func newHandoffCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outpost_site_handoffs_total",
		Help: "Hand-offs of buffered operations to central (SignalWithStart), by category and outcome (acked, failed).",
	}, []string{"category", "outcome"})
}

// newMetricsRegistry gathers the site's metrics: the store's state, read on
// every scrape, the hand-off counter, and the Go process.
func newMetricsRegistry(store *sitestore.Store, handoffs *prometheus.CounterVec, now func() time.Time) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(handoffs, &storeCollector{store: store, now: now})
	return reg
}

var (
	bufferDepthDesc = prometheus.NewDesc("outpost_site_buffer_depth",
		"Operations in the site buffer, by category (cached calls stay until delivered or discarded).", []string{"category"}, nil)
	bufferOldestDesc = prometheus.NewDesc("outpost_site_buffer_oldest_age_seconds",
		"Age of the oldest buffered operation, by category.", []string{"category"}, nil)
	notificationBacklogDesc = prometheus.NewDesc("outpost_site_notification_backlog",
		"Notifications not yet acknowledged by central (the site-to-central leg).", nil, nil)
	trackingRowsDesc = prometheus.NewDesc("outpost_site_tracking_rows",
		"Cached-call tracking rows on the site, by status.", []string{"status"}, nil)
	telemetryBacklogDesc = prometheus.NewDesc("outpost_site_telemetry_backlog",
		"Tracking changes central has not persisted yet.", nil, nil)
	telemetryLagDesc = prometheus.NewDesc("outpost_site_telemetry_lag_seconds",
		"Age of the oldest tracking change central has not persisted yet (0 when none).", nil, nil)
	clockLeadDesc = prometheus.NewDesc("outpost_site_clock_lead_seconds",
		"How far the latest timestamp the site issued is ahead of its wall clock: above 0 the clock was set back "+
			"(or had run ahead), and ages read from it are short by this much. Alert when it is above a few seconds.", nil, nil)
	storeCommitsDesc = prometheus.NewDesc("outpost_site_store_commits_total",
		"Transactions the site store's group-commit writer committed; enqueues per commit is the batching at work.", nil, nil)
)

// storeCollector reads the site store at scrape time: the numbers are
// always current and cost nothing between scrapes.
type storeCollector struct {
	store *sitestore.Store
	now   func() time.Time
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{bufferDepthDesc, bufferOldestDesc, notificationBacklogDesc,
		trackingRowsDesc, telemetryBacklogDesc, telemetryLagDesc, storeCommitsDesc, clockLeadDesc} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := c.now()
	ch <- prometheus.MustNewConstMetric(storeCommitsDesc, prometheus.CounterValue, float64(c.store.Commits()))
	if lead, err := c.store.ClockLead(ctx, now); err != nil {
		ch <- prometheus.NewInvalidMetric(clockLeadDesc, err)
	} else {
		ch <- prometheus.MustNewConstMetric(clockLeadDesc, prometheus.GaugeValue, lead.Seconds())
	}
	c.collectBuffer(ctx, ch, now)
	counts, err := c.store.TrackingCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(trackingRowsDesc, err)
	}
	for status, n := range counts {
		ch <- prometheus.MustNewConstMetric(trackingRowsDesc, prometheus.GaugeValue, float64(n), status)
	}
	backlog, oldest, err := c.store.TelemetryLag(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(telemetryBacklogDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(telemetryBacklogDesc, prometheus.GaugeValue, float64(backlog))
	ch <- prometheus.MustNewConstMetric(telemetryLagDesc, prometheus.GaugeValue, ageSeconds(now, oldest))
}

func (c *storeCollector) collectBuffer(ctx context.Context, ch chan<- prometheus.Metric, now time.Time) {
	stats, err := c.store.BufferStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(bufferDepthDesc, err)
		return
	}
	notifications := 0
	for _, st := range stats {
		ch <- prometheus.MustNewConstMetric(bufferDepthDesc, prometheus.GaugeValue, float64(st.Depth), st.Category)
		ch <- prometheus.MustNewConstMetric(bufferOldestDesc, prometheus.GaugeValue, ageSeconds(now, st.Oldest), st.Category)
		if st.Category == sitestore.CategoryNotification {
			notifications = st.Depth
		}
	}
	ch <- prometheus.MustNewConstMetric(notificationBacklogDesc, prometheus.GaugeValue, float64(notifications))
}

func ageSeconds(now, since time.Time) float64 {
	if since.IsZero() || since.After(now) {
		return 0
	}
	return now.Sub(since).Seconds()
}
