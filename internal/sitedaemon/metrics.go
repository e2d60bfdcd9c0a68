package sitedaemon

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// Handoff outcomes, the label of outpost_site_handoffs_total.
const (
	handoffAcked  = "acked"
	handoffFailed = "failed"
	// handoffRefused is a hand-off central refused for good: the row is
	// parked on the site.
	handoffRefused = "refused"
	// handoffWaiting is a hand-off central refused until it is set up
	// (search attributes, namespace, permission): retried at the forward
	// interval.
	handoffWaiting = "waiting_for_central"
)

// newHandoffCounter counts hand-offs to central by category and outcome:
// its rate is the handoff rate, its failed series the handoff errors.
func newHandoffCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "outpost_site_handoffs_total",
		Help: "Hand-offs of buffered operations to central (workflow starts), by category and outcome (acked; failed; waiting_for_central, refused until central is set up, retried; refused, parked on the site).",
	}, []string{"category", "outcome"})
}

// newMetricsRegistry gathers the site's metrics: the store's state and its
// air-gap transfers, read on every scrape, the hand-off counter, and the Go
// process.
func newMetricsRegistry(store *sitestore.Store, fwd *Forwarder, now func() time.Time) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(fwd.handoffs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "outpost_site_handoff_waiting_for_central",
		Help: "1 while central refuses hand-offs it will accept once it is set up (search attributes not registered, " +
			"namespace missing, permission denied): the rows are retried at the forward interval; /readyz says why.",
	}, func() float64 {
		if fwd.WaitingForCentral() != "" {
			return 1
		}
		return 0
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "outpost_site_handoff_window",
		Help: "How many hand-offs the forwarder may keep in flight now: site.forward_parallelism at first, more while " +
			"round trips to central stay near their least (a long link), up to site.forward_max_in_flight.",
	}, func() float64 { return float64(fwd.window.size()) }))
	reg.MustRegister(&storeCollector{store: store, now: now, ages: ageWatch{seen: map[string]firstSeen{}}}, &airgapCollector{store: store})
	return reg
}

var (
	bufferDepthDesc = prometheus.NewDesc("outpost_site_buffer_depth",
		"Operations in the site buffer, by category (cached calls stay until delivered or discarded).", []string{"category"}, nil)
	bufferOldestDesc = prometheus.NewDesc("outpost_site_buffer_oldest_age_seconds",
		"Age of the oldest buffered operation, by category: by the wall clock, and never less than this daemon "+
			"has seen it waiting (so a clock set back does not read 0).", []string{"category"}, nil)
	parkedOnSiteDesc = prometheus.NewDesc("outpost_site_parked_on_site",
		"Operations parked on the site because central refused their hand-off for good (over a size limit), by category: "+
			"'outpost parked list' shows them and 'outpost parked retry' requeues them.", []string{"category"}, nil)
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
	ages  ageWatch
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{bufferDepthDesc, bufferOldestDesc, parkedOnSiteDesc, notificationBacklogDesc,
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
	ch <- prometheus.MustNewConstMetric(telemetryLagDesc, prometheus.GaugeValue, c.ages.seconds("telemetry", now, oldest))
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
		ch <- prometheus.MustNewConstMetric(parkedOnSiteDesc, prometheus.GaugeValue, float64(st.Parked), st.Category)
		ch <- prometheus.MustNewConstMetric(bufferOldestDesc, prometheus.GaugeValue, c.ages.seconds("buffer/"+st.Category, now, st.Oldest), st.Category)
		if st.Category == contract.KindNotification {
			notifications = st.Depth
		}
	}
	ch <- prometheus.MustNewConstMetric(notificationBacklogDesc, prometheus.GaugeValue, float64(notifications))
}

// ageWatch measures how long the oldest row of each series has waited.
// The wall clock alone reads 0 for a row created while the clock ran ahead
// and then set back (its created time is in the future), so the watch also
// remembers, by the process's monotonic clock, when it first saw that row
// as the oldest, and reports the larger age: the metric keeps growing while
// the row waits, whatever the wall clock does.
type ageWatch struct {
	mu   sync.Mutex
	seen map[string]firstSeen
}

// firstSeen is the oldest row's created time and when the watch first saw
// it (with a monotonic reading).
type firstSeen struct{ created, at time.Time }

// seconds is the age of the oldest row of series key, created at created
// (zero when the series is empty), at wall time now.
func (w *ageWatch) seconds(key string, now, created time.Time) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if created.IsZero() {
		delete(w.seen, key)
		return 0
	}
	f, ok := w.seen[key]
	if !ok || !f.created.Equal(created) {
		f = firstSeen{created: created, at: time.Now()}
		w.seen[key] = f
	}
	return max(now.Sub(created), time.Since(f.at), 0).Seconds()
}
