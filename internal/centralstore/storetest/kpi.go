package storetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

const (
	kpiStuckAge = 10 * time.Minute
	kpiWindow   = time.Hour
)

// kpiSuite checks the KPIs and the operator listing; Exercise runs it.
func kpiSuite(t *testing.T, store *centralstore.Store) {
	t.Run("Counts", func(t *testing.T) { kpis(t, store) })
	t.Run("OperatorItems", func(t *testing.T) { operatorItems(t, store) })
}

// kpiFixture is rows on two fresh sites at chosen times around now.
type kpiFixture struct {
	now          time.Time
	siteA, siteB string
	// ids by name, for the listing checks.
	ids map[string]string
}

func newKPIFixture(t *testing.T, store *centralstore.Store) kpiFixture {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	f := kpiFixture{now: now, siteA: newSiteID(), siteB: newSiteID(), ids: map[string]string{}}
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	const second = time.Second

	notes := []struct {
		name, site string
		status     contract.Status
		created    time.Time
		delivered  time.Time // Delivered only
		subject    string
	}{
		{"a-just-older", f.siteA, contract.StatusPending, ago(kpiStuckAge + second), time.Time{}, "just older than the stuck age"},
		{"a-just-younger", f.siteA, contract.StatusPending, ago(kpiStuckAge - second), time.Time{}, "just younger"},
		{"a-exactly", f.siteA, contract.StatusPending, ago(kpiStuckAge), time.Time{}, "exactly the stuck age"},
		{"a-retrying", f.siteA, contract.StatusRetrying, ago(2 * time.Hour), time.Time{}, "Boiler 7 [overheat] 100%_ hot"},
		{"a-parked", f.siteA, contract.StatusParked, ago(3 * time.Hour), time.Time{}, "Pump 3 tripped"},
		{"a-delivered", f.siteA, contract.StatusDelivered, ago(40 * time.Minute), ago(30 * time.Minute), "delivered"},
		{"a-delivered-old", f.siteA, contract.StatusDelivered, ago(3 * time.Hour), ago(2 * time.Hour), "delivered long ago"},
		{"a-discarded", f.siteA, contract.StatusDiscarded, ago(5 * time.Hour), time.Time{}, "discarded"},
		{"b-pending", f.siteB, contract.StatusPending, ago(time.Minute), time.Time{}, "fresh"},
		{"b-in-window", f.siteB, contract.StatusDelivered, ago(2 * time.Hour), ago(kpiWindow - second), "just in the window"},
		{"b-out-of-window", f.siteB, contract.StatusDelivered, ago(2 * time.Hour), ago(kpiWindow + second), "just out of the window"},
	}
	for _, n := range notes {
		row := newRow()
		row.SourceSiteID, row.Subject, row.ListName = n.site, n.subject, "ops-"+n.site
		row.CreatedAt, row.SiteEnqueuedAt = n.created, n.created.Add(-second)
		_, _, err := store.InsertNotification(ctx, row)
		require.NoError(t, err)
		switch n.status {
		case contract.StatusPending:
		case contract.StatusDelivered:
			require.NoError(t, store.MarkNotificationDelivered(ctx, row.NotificationID, n.delivered, []string{"ops@example.com"}))
		default:
			require.NoError(t, store.UpdateNotificationStatus(ctx, contract.NotificationUpdate{
				NotificationID: row.NotificationID, Status: n.status, RetryCount: 2, LastError: "connection refused",
			}))
		}
		f.ids[n.name] = row.NotificationID
	}

	calls := []struct {
		name, site, kind string
		status           contract.Status
		created          time.Time
		terminal         time.Time // terminal statuses only
	}{
		{"a-call-retrying", f.siteA, contract.KindExternalCall, contract.StatusRetrying, ago(20 * time.Minute), time.Time{}},
		{"a-call-parked", f.siteA, contract.KindExternalCall, contract.StatusParked, ago(5 * time.Hour), time.Time{}},
		{"a-call-delivered", f.siteA, contract.KindExternalCall, contract.StatusDelivered, ago(6 * time.Minute), ago(5 * time.Minute)},
		{"a-call-failed", f.siteA, contract.KindExternalCall, contract.StatusFailed, ago(6 * time.Minute), ago(5 * time.Minute)},
		{"a-write-younger", f.siteA, contract.KindDatabaseWrite, contract.StatusPending, ago(kpiStuckAge - second), time.Time{}},
		{"a-write-older", f.siteA, contract.KindDatabaseWrite, contract.StatusPending, ago(kpiStuckAge + 2*second), time.Time{}},
		{"b-write-parked-1", f.siteB, contract.KindDatabaseWrite, contract.StatusParked, ago(time.Hour), time.Time{}},
		{"b-write-parked-2", f.siteB, contract.KindDatabaseWrite, contract.StatusParked, ago(2 * time.Hour), time.Time{}},
		{"b-write-delivered-old", f.siteB, contract.KindDatabaseWrite, contract.StatusDelivered, ago(2 * time.Hour), ago(kpiWindow + time.Minute)},
		{"b-call-discarded", f.siteB, contract.KindExternalCall, contract.StatusDiscarded, ago(time.Hour), ago(30 * time.Minute)},
	}
	rows := make([]contract.TrackedOperation, 0, len(calls))
	for i, c := range calls {
		r := newSiteCall(c.site, int64(i+1))
		r.Kind, r.Status, r.CreatedAt, r.UpdatedAt = c.kind, c.status, c.created, c.created
		r.Target = "erp.postOrder"
		if c.kind == contract.KindDatabaseWrite {
			r.Target = "historian"
		}
		r.LastAttemptAt, r.NextAttemptAt = nil, nil
		if !c.terminal.IsZero() {
			at := c.terminal
			r.TerminalAt, r.UpdatedAt = &at, at
		}
		rows = append(rows, r)
		f.ids[c.name] = r.OperationID
	}
	_, err := store.UpsertSiteCalls(ctx, rows)
	require.NoError(t, err)
	return f
}

func kpis(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	f := newKPIFixture(t, store)
	report, err := store.KPIs(ctx, centralstore.KPIQuery{Now: f.now, StuckAge: kpiStuckAge, Window: kpiWindow})
	require.NoError(t, err)
	require.True(t, f.now.Equal(report.At))
	require.Equal(t, kpiStuckAge.Seconds(), report.StuckAgeSeconds)
	require.Equal(t, kpiWindow.Seconds(), report.WindowSeconds)

	at := func(d time.Duration) *time.Time { t := f.now.Add(-d); return &t }
	want := map[string]map[string]centralstore.KPIs{
		f.siteA: {
			// Exactly the stuck age and one second younger are not stuck;
			// one second older is.
			contract.KindNotification:  {Queue: 4, Stuck: 2, Parked: 1, Delivered: 1, OldestPendingAt: at(2 * time.Hour)},
			contract.KindExternalCall:  {Queue: 1, Stuck: 1, Parked: 1, Delivered: 1, OldestPendingAt: at(20 * time.Minute)},
			contract.KindDatabaseWrite: {Queue: 2, Stuck: 1, OldestPendingAt: at(kpiStuckAge + 2*time.Second)},
		},
		f.siteB: {
			contract.KindNotification:  {Queue: 1, Delivered: 1, OldestPendingAt: at(time.Minute)},
			contract.KindExternalCall:  {},
			contract.KindDatabaseWrite: {Parked: 2},
		},
	}
	wantTotal := map[string]centralstore.KPIs{
		f.siteA: {Queue: 7, Stuck: 4, Parked: 2, Delivered: 2, OldestPendingAt: at(2 * time.Hour)},
		f.siteB: {Queue: 1, Parked: 2, Delivered: 1, OldestPendingAt: at(time.Minute)},
	}
	for _, site := range []string{f.siteA, f.siteB} {
		g := siteGroup(t, report, site)
		require.Len(t, g.Kinds, len(contract.Kinds()))
		for i, k := range g.Kinds {
			require.Equal(t, contract.Kinds()[i], k.Kind)
			requireKPIs(t, want[site][k.Kind], k.KPIs, f.now, site+" "+k.Kind)
			requireKPIs(t, sqlKPIs(t, store.DB(), f.now, k.Kind, site), k.KPIs, f.now, "sql "+site+" "+k.Kind)
		}
		requireKPIs(t, wantTotal[site], g.Total, f.now, site+" total")
	}

	// Globally, the store holds other tests' rows too: compare with counts
	// made directly in SQL, and with the sum over sites.
	var sum centralstore.KPIs
	for i, k := range report.Global.Kinds {
		require.Equal(t, contract.Kinds()[i], k.Kind)
		requireKPIs(t, sqlKPIs(t, store.DB(), f.now, k.Kind, ""), k.KPIs, f.now, "global "+k.Kind)
		sum.Queue, sum.Stuck, sum.Parked, sum.Delivered = sum.Queue+k.Queue, sum.Stuck+k.Stuck, sum.Parked+k.Parked, sum.Delivered+k.Delivered
	}
	require.Equal(t, sum.Queue, report.Global.Total.Queue)
	require.Equal(t, sum.Stuck, report.Global.Total.Stuck)
	require.Equal(t, sum.Parked, report.Global.Total.Parked)
	require.Equal(t, sum.Delivered, report.Global.Total.Delivered)
	var perSite int
	for _, g := range report.Sites {
		perSite += g.Total.Queue
	}
	require.Equal(t, report.Global.Total.Queue, perSite)

	// Two seconds later the one-second-younger rows and the one at exactly
	// the stuck age are stuck too; the one-hour window has lost b-in-window.
	later, err := store.KPIs(ctx, centralstore.KPIQuery{Now: f.now.Add(2 * time.Second), StuckAge: kpiStuckAge, Window: kpiWindow})
	require.NoError(t, err)
	a := siteGroup(t, later, f.siteA)
	require.Equal(t, 4, a.Kind(contract.KindNotification).Stuck)
	require.Equal(t, 2, a.Kind(contract.KindDatabaseWrite).Stuck)
	require.Equal(t, 0, siteGroup(t, later, f.siteB).Kind(contract.KindNotification).Delivered)
	require.InDelta(t, (2*time.Hour + 2*time.Second).Seconds(), a.Total.OldestPendingAgeSeconds, 0.001)

	// Since the previous sample counts beside the window, from its own
	// bound: 35 minutes back finds a-delivered only; three hours back all of
	// siteA's and siteB's deliveries, the window's and older.
	sample, err := store.KPIs(ctx, centralstore.KPIQuery{Now: f.now, StuckAge: kpiStuckAge, Window: kpiWindow, Since: f.now.Add(-35 * time.Minute)})
	require.NoError(t, err)
	require.NotNil(t, sample.Since)
	require.Equal(t, 1, siteGroup(t, sample, f.siteA).Kind(contract.KindNotification).DeliveredSince)
	require.Equal(t, 0, siteGroup(t, sample, f.siteB).Kind(contract.KindNotification).DeliveredSince)
	require.Equal(t, 1, siteGroup(t, sample, f.siteA).Kind(contract.KindNotification).Delivered, "the window is unchanged")
	sample, err = store.KPIs(ctx, centralstore.KPIQuery{Now: f.now, StuckAge: kpiStuckAge, Window: kpiWindow, Since: f.now.Add(-3 * time.Hour)})
	require.NoError(t, err)
	require.Equal(t, 2, siteGroup(t, sample, f.siteA).Kind(contract.KindNotification).DeliveredSince)
	require.Equal(t, 2, siteGroup(t, sample, f.siteB).Kind(contract.KindNotification).DeliveredSince)
	require.Equal(t, 1, siteGroup(t, sample, f.siteB).Kind(contract.KindNotification).Delivered, "the window still counts only its own")
	require.Zero(t, report.Global.Total.DeliveredSince, "no since, no count")
}

func siteGroup(t *testing.T, r centralstore.KPIReport, site string) centralstore.KPIGroup {
	t.Helper()
	for _, g := range r.Sites {
		if g.Site == site {
			return g
		}
	}
	require.Failf(t, "site missing from the report", "site %s", site)
	return centralstore.KPIGroup{}
}

// requireKPIs compares want and got, the oldest pending time by instant and
// its age against now.
func requireKPIs(t *testing.T, want, got centralstore.KPIs, now time.Time, msg string) {
	t.Helper()
	require.Equal(t, want.Queue, got.Queue, "%s: queue", msg)
	require.Equal(t, want.Stuck, got.Stuck, "%s: stuck", msg)
	require.Equal(t, want.Parked, got.Parked, "%s: parked", msg)
	require.Equal(t, want.Delivered, got.Delivered, "%s: delivered", msg)
	require.Equal(t, want.OldestPendingAt == nil, got.OldestPendingAt == nil, "%s: oldest pending", msg)
	if want.OldestPendingAt != nil {
		require.True(t, want.OldestPendingAt.Equal(*got.OldestPendingAt), "%s: oldest pending: want %s, got %s", msg, want.OldestPendingAt, got.OldestPendingAt)
		require.InDelta(t, now.Sub(*want.OldestPendingAt).Seconds(), got.OldestPendingAgeSeconds, 0.001, "%s: oldest pending age", msg)
	} else {
		require.Zero(t, got.OldestPendingAgeSeconds, "%s: oldest pending age", msg)
	}
}

// sqlKPIs counts kind's rows directly in SQL, independently of the store's
// queries; site "" counts every site. The oldest pending time is found by
// counting rows before and at each candidate, so the test never has to
// parse an aggregate's text.
func sqlKPIs(t *testing.T, db *sql.DB, now time.Time, kind, site string) centralstore.KPIs {
	t.Helper()
	table, deliveredCol, where := "site_calls", "terminal_at", "kind = @kind"
	if kind == contract.KindNotification {
		table, deliveredCol, where = "notifications", "delivered_at", "1 = 1"
	}
	if site != "" {
		where += " AND source_site_id = @site"
	}
	args := namedArgs(db, map[string]any{"kind": kind, "site": site,
		"stuck": now.Add(-kpiStuckAge), "since": now.Add(-kpiWindow)})
	count := func(cond string) int {
		t.Helper()
		var n int
		q := "SELECT count(*) FROM " + table + " WHERE " + where + " AND " + cond
		require.NoError(t, db.QueryRow(q, args...).Scan(&n), q)
		return n
	}
	k := centralstore.KPIs{
		Queue:     count("status IN ('Pending', 'Retrying')"),
		Stuck:     count("status IN ('Pending', 'Retrying') AND created_at < @stuck"),
		Parked:    count("status = 'Parked'"),
		Delivered: count("status = 'Delivered' AND " + deliveredCol + " >= @since"),
	}
	if k.Queue == 0 {
		return k
	}
	// The oldest is the first queued row by created_at, a plain column both
	// drivers return as a time (the store uses MIN instead).
	rows, err := db.Query("SELECT created_at FROM "+table+" WHERE "+where+
		" AND status IN ('Pending', 'Retrying') ORDER BY created_at", args...)
	require.NoError(t, err)
	defer rows.Close()
	require.True(t, rows.Next())
	var oldest time.Time
	require.NoError(t, rows.Scan(&oldest))
	oldest = oldest.UTC()
	k.OldestPendingAt = &oldest
	return k
}

// namedArgs binds the @name parameters of a query on db: as sql.Named on
// SQLite and SQL Server, as one pgx.NamedArgs on PostgreSQL, whose driver
// takes no sql.Named.
func namedArgs(db *sql.DB, values map[string]any) []any {
	if _, ok := db.Driver().(*stdlib.Driver); ok {
		return []any{pgx.NamedArgs(values)}
	}
	args := make([]any, 0, len(values))
	for name, v := range values {
		args = append(args, sql.Named(name, v))
	}
	return args
}

func operatorItems(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	f := newKPIFixture(t, store)
	list := func(filter centralstore.ItemFilter) ([]string, bool) {
		t.Helper()
		filter.Now, filter.StuckAge = f.now, kpiStuckAge
		got, err := store.ListOperatorItems(ctx, filter)
		require.NoError(t, err)
		var names []string
		for _, it := range got.Items {
			names = append(names, f.name(it.ID))
		}
		return names, got.More
	}

	// Newest first: stuck (Pending/Retrying past the stuck age) and parked.
	names, more := list(centralstore.ItemFilter{Site: f.siteA})
	require.Equal(t, []string{"a-just-older", "a-write-older", "a-call-retrying", "a-retrying", "a-parked", "a-call-parked"}, names)
	require.False(t, more)

	names, _ = list(centralstore.ItemFilter{Site: f.siteA, Status: string(contract.StatusParked)})
	require.Equal(t, []string{"a-parked", "a-call-parked"}, names)
	names, _ = list(centralstore.ItemFilter{Site: f.siteA, Status: centralstore.ItemsStuck})
	require.Equal(t, []string{"a-just-older", "a-write-older", "a-call-retrying", "a-retrying"}, names)
	names, _ = list(centralstore.ItemFilter{Site: f.siteA, Status: string(contract.StatusRetrying)})
	require.Equal(t, []string{"a-call-retrying", "a-retrying"}, names)
	names, _ = list(centralstore.ItemFilter{Site: f.siteA, Kind: contract.KindExternalCall})
	require.Equal(t, []string{"a-call-retrying", "a-call-parked"}, names)
	names, _ = list(centralstore.ItemFilter{Site: f.siteB, Kind: contract.KindDatabaseWrite, Target: "historian"})
	require.Equal(t, []string{"b-write-parked-1", "b-write-parked-2"}, names)
	names, _ = list(centralstore.ItemFilter{Site: f.siteA, Target: "ops-" + f.siteA})
	require.Equal(t, []string{"a-just-older", "a-retrying", "a-parked"}, names)
	names, _ = list(centralstore.ItemFilter{Site: f.siteA, CreatedFrom: f.now.Add(-150 * time.Minute), CreatedTo: f.now.Add(-15 * time.Minute)})
	require.Equal(t, []string{"a-call-retrying", "a-retrying"}, names)
	// The keyword's wildcards and brackets are literal.
	names, _ = list(centralstore.ItemFilter{Site: f.siteA, Query: "[overheat] 100%_"})
	require.Equal(t, []string{"a-retrying"}, names)
	names, _ = list(centralstore.ItemFilter{Site: f.siteA, Query: "100%x"})
	require.Empty(t, names)
	names, _ = list(centralstore.ItemFilter{Site: f.siteA, Query: "postOrder"})
	require.Equal(t, []string{"a-call-retrying", "a-call-parked"}, names)
	names, more = list(centralstore.ItemFilter{Site: f.siteA, Limit: 2})
	require.Equal(t, []string{"a-just-older", "a-write-older"}, names)
	require.True(t, more)

	got, err := store.ListOperatorItems(ctx, centralstore.ItemFilter{Now: f.now, StuckAge: kpiStuckAge, Site: f.siteA, Kind: contract.KindNotification, Status: string(contract.StatusParked)})
	require.NoError(t, err)
	require.Len(t, got.Items, 1)
	it := got.Items[0]
	require.Equal(t, contract.KindNotification, it.Kind)
	require.Equal(t, "Pump 3 tripped", it.Subject)
	require.Equal(t, "connection refused", it.LastError)
	require.Equal(t, 2, it.RetryCount)
	require.False(t, it.Stuck)
	require.True(t, f.now.Add(-3*time.Hour).Equal(it.CreatedAt))
	require.Equal(t, contract.NotificationWorkflowID(f.ids["a-parked"]), it.WorkflowID())
	got, err = store.ListOperatorItems(ctx, centralstore.ItemFilter{Now: f.now, StuckAge: kpiStuckAge, Site: f.siteA, Kind: contract.KindDatabaseWrite})
	require.NoError(t, err)
	require.Len(t, got.Items, 1)
	require.True(t, got.Items[0].Stuck)
	require.Equal(t, contract.CachedCallWorkflowID(f.ids["a-write-older"]), got.Items[0].WorkflowID())

	_, err = store.ListOperatorItems(ctx, centralstore.ItemFilter{Status: "Delivered"})
	require.ErrorIs(t, err, centralstore.ErrInvalidFilter)
	_, err = store.ListOperatorItems(ctx, centralstore.ItemFilter{Kind: "Fax"})
	require.ErrorIs(t, err, centralstore.ErrInvalidFilter)
}

func (f kpiFixture) name(id string) string {
	for name, v := range f.ids {
		if v == id {
			return name
		}
	}
	return "unknown:" + id
}
