package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/workers"
)

// tablesStuckAge is central.stuck_age's default.
const tablesStuckAge = 10 * time.Minute

// tables prefills a central SQLite store with TableRows notifications and
// TableRows site_calls rows (prefillCentral: a year, 200 sites) and times,
// one request at a time, what reads central's tables at fleet scale: the
// KPIs (what the /metrics collector and the outbox page compute), a full
// /metrics scrape, the outbox page's list of parked items and the same
// list for one site, and pages of the list of every call and write (the
// first, a deep one and one site's Failed ones). The baseline is a primary-key lookup of a random row
// of either table, timed alternately with them. Then the purge of
// PurgeRows terminal rows, with the KPIs timed while it runs.
func (r *run) tables(ctx context.Context) ([]Row, error) {
	n := r.opts.TableRows
	r.step("tables: prefill %s notifications and %s site_calls rows from %d sites", thousands(int64(n)), thousands(int64(n)), centralSites)
	fill, err := r.prefillCentral(ctx, "tables-central.db", n, n)
	if err != nil {
		return nil, err
	}
	defer func() {
		fill.store.Close()
		r.removeStore("tables-central.db")
	}()
	insertRate := perSecond(2*n, fill.inserted)
	r.step("tables: inserted in %s (%s rows/s), indexes built in %s; %s requests of each kind",
		fill.inserted.Round(time.Second), thousands(int64(insertRate)), fill.indexed.Round(time.Second), thousands(int64(r.opts.TableRequests)))
	reads, err := r.timeTableReads(ctx, fill)
	if err != nil {
		return nil, err
	}
	rows := reads.rows(n)
	rows[0] = rows[0].withDetail("%s; prefill: %s rows inserted in %s (%s rows/s, secondary indexes dropped), indexes built in %s",
		rows[0].Detail, thousands(int64(2*n)), fill.inserted.Round(time.Second), thousands(int64(insertRate)), fill.indexed.Round(time.Second))
	purge, err := r.timePurge(ctx, fill, reads.kpiIdleP99())
	if err != nil {
		return rows, err
	}
	return append(rows, purge.rows(insertRate, reads.kpiIdleP99())...), nil
}

// Requests the tables section times, in the order of each round.
const (
	readKPIs       = "kpis"
	readMetrics    = "metrics"
	readParked     = "parked"
	readSiteParked = "siteParked"
	readCalls      = "calls"
	readCallsDeep  = "callsDeep"
	readSiteFailed = "siteFailed"
	readLookup     = "lookup"
)

var tableReads = []string{readKPIs, readMetrics, readParked, readSiteParked, readCalls, readCallsDeep, readSiteFailed, readLookup}

// tableLatencies are each request's latencies.
type tableLatencies map[string][]time.Duration

// timeTableReads times TableRequests rounds of every request after a
// warm-up, one request at a time.
func (r *run) timeTableReads(ctx context.Context, fill *centralFill) (tableLatencies, error) {
	metrics := workers.MetricsHandler(fill.store, tablesStuckAge, prometheus.NewRegistry(), workers.NewDeliveryEvents())
	lat := tableLatencies{}
	for i := range r.opts.TableRequests + statusWarmUp {
		for j, name := range tableReads {
			t0 := time.Now()
			if err := r.tableRead(ctx, fill, metrics, name, i+j); err != nil {
				return nil, fmt.Errorf("tables %s: %w", name, err)
			}
			if i >= statusWarmUp {
				lat[name] = append(lat[name], time.Since(t0))
			}
		}
	}
	return lat, nil
}

// tableRead runs one request of kind name; turn alternates the lookups
// between the two tables.
func (r *run) tableRead(ctx context.Context, fill *centralFill, metrics http.Handler, name string, turn int) error {
	switch name {
	case readKPIs:
		return kpis(ctx, fill.store)
	case readMetrics:
		return scrape(metrics)
	case readParked:
		_, err := fill.store.ListOperatorItems(ctx, parkedFilter(""))
		return err
	case readSiteParked:
		_, err := fill.store.ListOperatorItems(ctx, parkedFilter(siteOf(7)))
		return err
	case readCalls, readCallsDeep, readSiteFailed:
		_, err := fill.store.ListCalls(ctx, callPage(fill, name))
		return err
	}
	if turn%2 == 0 {
		_, err := fill.store.GetNotification(ctx, fill.notificationIDs[rand.IntN(len(fill.notificationIDs))])
		return err
	}
	_, err := fill.store.GetSiteCall(ctx, fill.callIDs[rand.IntN(len(fill.callIDs))])
	return err
}

// kpis computes the KPIs as the /metrics collector does: the last hour,
// and deliveries since a scrape 15 s ago.
func kpis(ctx context.Context, store *centralstore.Store) error {
	now := time.Now()
	_, err := store.KPIs(ctx, centralstore.KPIQuery{Now: now, StuckAge: tablesStuckAge, Window: time.Hour, Since: now.Add(-15 * time.Second)})
	return err
}

// scrape is one GET /metrics, its whole body written.
func scrape(metrics http.Handler) error {
	rec := httptest.NewRecorder()
	metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "outpost_central_parked{") {
		return fmt.Errorf("/metrics answered %d without the KPIs: %.300s", rec.Code, rec.Body.String())
	}
	return nil
}

// parkedFilter is the outbox page's list of parked items (?status=Parked,
// its default limit), of one site when site is set.
func parkedFilter(site string) centralstore.ItemFilter {
	return centralstore.ItemFilter{Status: string(contract.StatusParked), Site: site, StuckAge: tablesStuckAge, Limit: 200}
}

// callPage is the filter of a calls list page (outpost calls list, the
// outbox page's /calls), 50 rows: the first page, the page after nine tenths
// of the rows (a call whose id the prefill kept), or one site's Failed ones.
func callPage(fill *centralFill, name string) centralstore.CallFilter {
	switch name {
	case readCallsDeep:
		i := len(fill.callIDs) / 10 // the prefill's row n/10: nine tenths of the rows are newer
		return centralstore.CallFilter{After: &centralstore.Cursor{CreatedAt: fill.at(i * 10), ID: fill.callIDs[i]}}
	case readSiteFailed:
		return centralstore.CallFilter{Site: siteOf(7), Status: contract.StatusFailed}
	}
	return centralstore.CallFilter{}
}

func (lat tableLatencies) p(name string, q float64) float64 { return ms(percentile(lat[name], q)) }

func (lat tableLatencies) kpiIdleP99() float64 { return lat.p(readKPIs, 0.99) }

// rows are the read figures, each against the lookup.
func (lat tableLatencies) rows(n int) []Row {
	lookup := Figure{Name: "primary-key lookup p99, same tables", Value: lat.p(readLookup, 0.99), Unit: "ms"}
	size := thousands(int64(n)) + " rows each"
	reads := []struct {
		name, measure, what string
		target              float64
	}{
		{readKPIs, "KPIs p99, " + size, "store.KPIs as the /metrics collector runs it (last hour, since a scrape 15 s ago)", 250},
		{readMetrics, "/metrics scrape p99, " + size, "central's GET /metrics handler (workers.MetricsHandler), whole body", 250},
		{readParked, "outbox parked list p99, " + size, "ListOperatorItems ?status=Parked, 200 newest of both tables", 100},
		{readSiteParked, "parked list of one site p99, " + size, "ListOperatorItems ?status=Parked&site=site-007 (the central store's answer to 'outpost parked list --site', which asks Temporal's visibility store)", 100},
		{readCalls, "calls list, first page p99, " + size, "ListCalls, 50 rows newest first by (created_at, operation_id), as 'outpost calls list' and the outbox page's /calls run it", 100},
		{readCallsDeep, "calls list, deep page p99, " + size, "ListCalls, the 50 rows after the cursor at nine tenths of the rows", 100},
		{readSiteFailed, "calls list, one site's Failed p99, " + size, "ListCalls ?site=site-007&status=Failed, 50 rows (1% of the site's rows)", 100},
	}
	var rows []Row
	for _, rd := range reads {
		row := compare(SectionTables, rd.measure, lat.p(rd.name, 0.99), "ms", lookup).atMost(rd.target)
		rows = append(rows, row.withDetail("p50 %.2f ms; %s; lookup p50 %.2f ms", lat.p(rd.name, 0.5), rd.what, lat.p(readLookup, 0.5)))
	}
	return rows
}

// purgeKPIInterval paces the KPIs timed during the purge: ten a second, far
// more than scrapes and outbox pages ask, but not a reader that never lets
// go, which would keep SQLite from ever checkpointing the purge's WAL.
const purgeKPIInterval = 100 * time.Millisecond

// purgeRun is the purge and the KPIs timed while it ran.
type purgeRun struct {
	result centralstore.PurgeResult
	took   time.Duration
	kpis   []time.Duration
}

// timePurge purges PurgeRows terminal rows, half of them notifications and
// half site_calls (the oldest), as the daily purge does (1,000-row
// transactions), and times the KPIs every purgeKPIInterval while it runs.
func (r *run) timePurge(ctx context.Context, fill *centralFill, idleP99 float64) (purgeRun, error) {
	n := r.opts.PurgeRows
	r.step("tables: purge %s terminal rows, KPIs timed meanwhile (idle p99 %.1f ms)", thousands(int64(n)), idleP99)
	req := centralstore.PurgeRequest{
		// Some of the oldest rows are not terminal, so the cutoffs reach
		// further than half each; MaxRows stops at n.
		NotificationsBefore: fill.at(n / 2),
		SiteCallsBefore:     fill.at(n),
		Batch:               1000,
		MaxRows:             n,
	}
	done := make(chan purgeOutcome, 1)
	start := time.Now()
	go func() {
		res, err := fill.store.Purge(ctx, req)
		done <- purgeOutcome{res, err, time.Since(start)}
	}()
	var kpiLatencies []time.Duration
	tick := time.NewTicker(purgeKPIInterval)
	defer tick.Stop()
	for {
		t0 := time.Now()
		if err := kpis(ctx, fill.store); err != nil {
			return purgeRun{}, fmt.Errorf("kpis during the purge: %w", err)
		}
		kpiLatencies = append(kpiLatencies, time.Since(t0))
		<-tick.C
		select {
		case o := <-done:
			if o.err != nil {
				return purgeRun{}, fmt.Errorf("purge: %w", o.err)
			}
			if deleted := o.res.Notifications + o.res.SiteCalls; deleted != n {
				return purgeRun{}, fmt.Errorf("purge deleted %d rows, want %d (are there %d terminal rows before the cutoffs?)", deleted, n, n)
			}
			return purgeRun{result: o.res, took: o.took, kpis: kpiLatencies}, nil
		default:
		}
	}
}

// purgeOutcome is what the purge goroutine hands back.
type purgeOutcome struct {
	res  centralstore.PurgeResult
	err  error
	took time.Duration
}

// rows are the purge's rate against the prefill's insert rate, and the
// KPIs' p99 while it ran against their p99 idle.
func (p purgeRun) rows(insertRate, idleP99 float64) []Row {
	deleted := p.result.Notifications + p.result.SiteCalls
	rate := compare(SectionTables, fmt.Sprintf("purge of %s terminal rows", thousands(int64(deleted))), perSecond(deleted, p.took), "/s",
		Figure{Name: "prefill bulk insert, same tables", Value: insertRate, Unit: "/s"}).atLeast(20000)
	rate = rate.withDetail("Store.Purge as the daily purge runs it, 1,000 rows a transaction: %s notifications, %s site_calls rows in %s (%d batches)",
		thousands(int64(p.result.Notifications)), thousands(int64(p.result.SiteCalls)), p.took.Round(time.Millisecond), p.result.Batches)
	during := ms(percentile(p.kpis, 0.99))
	kpi := compare(SectionTables, "KPIs p99 during the purge", during, "ms", Figure{Name: "KPIs p99 idle, same run", Value: idleP99, Unit: "ms"}).atMostRatio(2)
	kpi = kpi.withDetail("p50 %.2f ms over %d KPI computations, one every %s, while the purge ran", ms(percentile(p.kpis, 0.5)), len(p.kpis), purgeKPIInterval)
	return []Row{rate, kpi}
}
