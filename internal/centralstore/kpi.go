package centralstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// KPIs are the outbox indicators of one slice of the central tables (one
// kind, one site, or everything).
type KPIs struct {
	// Queue is how many items wait for delivery: Pending or Retrying.
	Queue int `json:"queue"`
	// Stuck is how many queued items (Pending or Retrying) were created more
	// than the stuck age ago. Parked items are counted apart, in Parked.
	Stuck int `json:"stuck"`
	// Parked is how many items wait for an operator's retry or discard.
	Parked int `json:"parked"`
	// Delivered is how many items were delivered within the window before
	// the report's time.
	Delivered int `json:"delivered"`
	// DeliveredSince is how many items were delivered at or after the
	// query's Since (the previous sample): 0 when it gave none.
	DeliveredSince int `json:"deliveredSince"`
	// OldestPendingAt is when the oldest queued item (Pending or Retrying;
	// parked items excluded) was created; nil when the queue is empty.
	OldestPendingAt *time.Time `json:"oldestPendingAt,omitempty"`
	// OldestPendingAgeSeconds is the report's time minus OldestPendingAt;
	// 0 when the queue is empty.
	OldestPendingAgeSeconds float64 `json:"oldestPendingAgeSeconds"`
}

// OldestPendingAge is the age of the oldest queued item; 0 when none.
func (k KPIs) OldestPendingAge() time.Duration {
	return time.Duration(k.OldestPendingAgeSeconds * float64(time.Second))
}

// add folds o into k; the age is recomputed by the caller.
func (k *KPIs) add(o KPIs) {
	k.Queue += o.Queue
	k.Stuck += o.Stuck
	k.Parked += o.Parked
	k.Delivered += o.Delivered
	k.DeliveredSince += o.DeliveredSince
	if o.OldestPendingAt != nil && (k.OldestPendingAt == nil || o.OldestPendingAt.Before(*k.OldestPendingAt)) {
		at := *o.OldestPendingAt
		k.OldestPendingAt = &at
	}
}

func (k *KPIs) setAge(now time.Time) {
	k.OldestPendingAgeSeconds = 0
	if k.OldestPendingAt != nil {
		k.OldestPendingAgeSeconds = now.Sub(*k.OldestPendingAt).Seconds()
	}
}

// KindKPIs are the KPIs of one kind.
type KindKPIs struct {
	// Kind is workflows.KindNotification, KindExternalCall or KindDatabaseWrite.
	Kind string `json:"kind"`
	KPIs
}

// KPIGroup is every kind's KPIs for one site, or for all sites.
type KPIGroup struct {
	// Site is the source site; empty in the global group.
	Site string `json:"site,omitempty"`
	// Total sums every kind.
	Total KPIs `json:"total"`
	// contract.Kinds() has one entry per kind, in the order of contract.Kinds(), zeros included.
	Kinds []KindKPIs `json:"kinds"`
}

// Kind returns the KPIs of kind (zeros for an unknown kind).
func (g KPIGroup) Kind(kind string) KPIs {
	for _, k := range g.Kinds {
		if k.Kind == kind {
			return k.KPIs
		}
	}
	return KPIs{}
}

// KPIReport is the outbox at one instant: notifications from the
// notifications table, cached calls (ExternalCall, DatabaseWrite) from the
// site_calls mirror.
type KPIReport struct {
	// At is the instant the report describes.
	At time.Time `json:"at"`
	// StuckAgeSeconds is the age past which a queued item counts as stuck.
	StuckAgeSeconds float64 `json:"stuckAgeSeconds"`
	// WindowSeconds is how far back Delivered counts.
	WindowSeconds float64 `json:"windowSeconds"`
	// Since is from when DeliveredSince counts (the previous sample); nil
	// when the query gave none.
	Since *time.Time `json:"since,omitempty"`
	// Global is every site together.
	Global KPIGroup `json:"global"`
	// Sites is one group per source site, ordered by site id. A site with
	// nothing queued, parked or delivered in the window is left out.
	Sites []KPIGroup `json:"sites"`
}

// KPIQuery is what KPIs computes.
type KPIQuery struct {
	// Now is the instant the report describes.
	Now time.Time
	// StuckAge: a Pending or Retrying item created more than StuckAge
	// before Now is stuck (exactly StuckAge is not).
	StuckAge time.Duration
	// Window: Delivered counts deliveries at or after Now-Window.
	Window time.Duration
	// Since, when set, is the previous sample's time: DeliveredSince counts
	// deliveries at or after it.
	Since time.Time
}

// KPIs computes the outbox indicators of q: per kind, globally and per
// source site. Times are passed as parameters, so both dialects compare
// them the same way.
func (s *Store) KPIs(ctx context.Context, q KPIQuery) (KPIReport, error) {
	now := q.Now.UTC()
	stuckBefore, deliveredSince := now.Add(-q.StuckAge), now.Add(-q.Window)
	since := q.Since.UTC()
	if q.Since.IsZero() {
		since = now.Add(time.Hour) // counts nothing
	}
	read, done, err := s.snapshot(ctx)
	if err != nil {
		return KPIReport{}, fmt.Errorf("kpis: %w", err)
	}
	defer done()
	cells := map[[2]string]*KPIs{} // (site, kind) → KPIs
	cell := func(site, kind string) *KPIs {
		k := [2]string{site, kind}
		if cells[k] == nil {
			cells[k] = &KPIs{}
		}
		return cells[k]
	}

	for _, query := range kpiQueuedQueries {
		err := s.eachRow(ctx, read, query, []any{stuckBefore}, func(rows *sql.Rows) error {
			var site, kind, status string
			var count, stuck int
			var oldest dbTime
			if err := rows.Scan(&site, &kind, &status, &count, &stuck, &oldest); err != nil {
				return err
			}
			cell(site, kind).addQueued(contract.Status(status), count, stuck, oldest)
			return nil
		})
		if err != nil {
			return KPIReport{}, fmt.Errorf("kpis: count queued items: %w", err)
		}
	}

	for _, query := range kpiDeliveredQueries {
		args := []any{deliveredSince, since, minTime(deliveredSince, since)}
		err := s.eachRow(ctx, read, query, args, func(rows *sql.Rows) error {
			var site, kind string
			var inWindow, sinceSample int
			if err := rows.Scan(&site, &kind, &inWindow, &sinceSample); err != nil {
				return err
			}
			c := cell(site, kind)
			c.Delivered, c.DeliveredSince = inWindow, sinceSample
			return nil
		})
		if err != nil {
			return KPIReport{}, fmt.Errorf("kpis: count deliveries: %w", err)
		}
	}

	report := KPIReport{At: now, StuckAgeSeconds: q.StuckAge.Seconds(), WindowSeconds: q.Window.Seconds(), Global: newGroup(""), Sites: []KPIGroup{}}
	if !q.Since.IsZero() {
		report.Since = &since
	}
	bySite := map[string]*KPIGroup{}
	for k, c := range cells {
		site, kind := k[0], k[1]
		g := bySite[site]
		if g == nil {
			ng := newGroup(site)
			g = &ng
			bySite[site] = g
		}
		for _, grp := range []*KPIGroup{g, &report.Global} {
			grp.Total.add(*c)
			i := slices.Index(contract.Kinds(), kind)
			if i < 0 {
				// A kind this build does not know still counts in the total.
				grp.Kinds = append(grp.Kinds, KindKPIs{Kind: kind})
				i = len(grp.Kinds) - 1
			}
			grp.Kinds[i].add(*c)
		}
	}
	for _, g := range bySite {
		report.Sites = append(report.Sites, *g)
	}
	slices.SortFunc(report.Sites, func(a, b KPIGroup) int { return cmp.Compare(a.Site, b.Site) })
	for _, g := range append([]*KPIGroup{&report.Global}, pointers(report.Sites)...) {
		g.Total.setAge(now)
		for i := range g.Kinds {
			g.Kinds[i].setAge(now)
		}
	}
	return report, nil
}

// kpiQueuedQueries count the queued and parked rows of notifications and of
// site_calls by status, site and kind; their one argument is the stuck
// cutoff. Each reads only its (status, source_site_id, created_at) or
// (status, source_site_id, kind, created_at) index, however many terminal
// rows the table keeps, and groups in the index's order: grouping by site
// alone sorted every queued and parked row first, 5x slower at a year of
// rows (outpost bench --only tables).
var kpiQueuedQueries = []string{
	fmt.Sprintf(kpiQueuedSQL, "'"+contract.KindNotification+"'", "notifications", ""),
	fmt.Sprintf(kpiQueuedSQL, "kind", "site_calls", ", kind"),
}

const kpiQueuedSQL = `SELECT source_site_id, %s, status, COUNT(*),
	SUM(CASE WHEN created_at < ? THEN 1 ELSE 0 END), MIN(created_at)
	FROM %s WHERE status IN ('Pending', 'Retrying', 'Parked')
	GROUP BY status, source_site_id%s`

// addQueued counts count rows in status, stuck of them stuck, the oldest
// created at oldest: Parked ones as parked, Pending and Retrying as queued.
func (k *KPIs) addQueued(status contract.Status, count, stuck int, oldest dbTime) {
	if status == contract.StatusParked {
		k.Parked += count
		return
	}
	k.Queue += count
	k.Stuck += stuck
	if oldest.Valid && (k.OldestPendingAt == nil || oldest.Time.Before(*k.OldestPendingAt)) {
		at := oldest.Time
		k.OldestPendingAt = &at
	}
}

// kpiDeliveredQueries count the deliveries in the window and since the
// previous sample, in one pass from the earlier of the two (the arguments:
// window start, sample, the earlier): a range of the (status,
// delivered_at) or (status, terminal_at) index.
var kpiDeliveredQueries = []string{
	fmt.Sprintf(kpiDeliveredSQL, "'"+contract.KindNotification+"'", "notifications", "delivered_at", ""),
	fmt.Sprintf(kpiDeliveredSQL, "kind", "site_calls", "terminal_at", ", kind"),
}

const kpiDeliveredSQL = `SELECT source_site_id, %[1]s,
	SUM(CASE WHEN %[3]s >= ? THEN 1 ELSE 0 END), SUM(CASE WHEN %[3]s >= ? THEN 1 ELSE 0 END)
	FROM %[2]s WHERE status = 'Delivered' AND %[3]s >= ? GROUP BY source_site_id%[4]s`

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func newGroup(site string) KPIGroup {
	g := KPIGroup{Site: site, Kinds: make([]KindKPIs, len(contract.Kinds()))}
	for i, k := range contract.Kinds() {
		g.Kinds[i].Kind = k
	}
	return g
}

func pointers(gs []KPIGroup) []*KPIGroup {
	out := make([]*KPIGroup, len(gs))
	for i := range gs {
		out[i] = &gs[i]
	}
	return out
}

// eachRow runs query (with "?" placeholders) and calls fn for every row.
// querier runs queries: the pool, or one transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// snapshot is a querier on one view of the store, and what ends it. On
// SQLite it is one read transaction: its queries agree with each other,
// and its connection empties its page cache at most once. SQLite empties
// a connection's cache whenever another connection committed since its
// last read, as the purge does every batch, so four queries on their own
// paid for that up to four times. SQL Server's driver has no read-only
// transactions: its queries go to the pool.
func (s *Store) snapshot(ctx context.Context) (querier, func(), error) {
	if !s.dialect.readOnlyTx {
		return s.reads, func() {}, nil
	}
	tx, err := s.reads.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("begin a read transaction: %w", err)
	}
	return tx, func() { _ = tx.Rollback() }, nil
}

func (s *Store) eachRow(ctx context.Context, q querier, query string, args []any, fn func(*sql.Rows) error) error {
	rows, err := q.QueryContext(ctx, s.bind(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Values of ItemFilter.Status besides Parked, Pending and Retrying.
const (
	// ItemsStuckOrParked (the empty filter) is every stuck and every parked item.
	ItemsStuckOrParked = ""
	// ItemsStuck is Pending and Retrying items older than the stuck age.
	ItemsStuck = "Stuck"
)

// ItemFilter selects the items of ListOperatorItems. Zero fields do not filter.
type ItemFilter struct {
	// Now and StuckAge define stuck: Pending or Retrying and created before
	// Now-StuckAge. Now defaults to the current time.
	Now      time.Time
	StuckAge time.Duration
	// Status is ItemsStuckOrParked (default), ItemsStuck, or one status:
	// Parked, or Pending or Retrying (stuck ones only).
	Status string
	// Kind is a workflows.Kind* value.
	Kind string
	// Site is the exact source site id.
	Site string
	// Target is the exact list name of a notification, or a call's target
	// ("system.method" or the database name).
	Target string
	// CreatedFrom (inclusive) and CreatedTo (exclusive) bound the creation time.
	CreatedFrom, CreatedTo time.Time
	// Query is a substring of a notification's subject or of a call's
	// target, matched case-insensitively for ASCII letters.
	Query string
	// Limit is the most items returned. Default 200.
	Limit int
}

// ErrInvalidFilter is returned for a filter value ListOperatorItems does not know.
var ErrInvalidFilter = errors.New("invalid filter")

// OperatorItem is a stuck or parked notification or cached call.
type OperatorItem struct {
	// Kind is workflows.KindNotification, KindExternalCall or KindDatabaseWrite.
	Kind string `json:"kind"`
	// ID is the NotificationId or TrackedOperationId.
	ID     string          `json:"id"`
	Site   string          `json:"site"`
	Status contract.Status `json:"status"`
	// Stuck is true for a Pending or Retrying item older than the stuck age.
	Stuck bool `json:"stuck"`
	// Target is a notification's list or a call's target.
	Target string `json:"target"`
	// Subject is a notification's subject; empty for calls.
	Subject       string     `json:"subject,omitempty"`
	RetryCount    int        `json:"retryCount"`
	LastError     string     `json:"lastError,omitempty"`
	CreatedAt     time.Time  `json:"createdAt"`
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
}

// WorkflowID is the id of the item's Temporal workflow.
func (i OperatorItem) WorkflowID() string {
	if i.Kind == contract.KindNotification {
		return contract.NotificationWorkflowID(i.ID)
	}
	return contract.CachedCallWorkflowID(i.ID)
}

// OperatorItems is the answer of ListOperatorItems.
type OperatorItems struct {
	// Items, newest first.
	Items []OperatorItem `json:"items"`
	// More is true when more items matched than the limit.
	More bool `json:"more"`
}

const defaultItemLimit = 200

// ListOperatorItems lists stuck and parked notifications and cached calls
// matching f, newest first.
func (s *Store) ListOperatorItems(ctx context.Context, f ItemFilter) (OperatorItems, error) {
	if f.Now.IsZero() {
		f.Now = time.Now()
	}
	if f.Limit <= 0 {
		f.Limit = defaultItemLimit
	}
	stateSQL, stateArgs, err := itemState(f.Status, f.Now.UTC().Add(-f.StuckAge))
	if err != nil {
		return OperatorItems{}, err
	}
	if f.Kind != "" && !slices.Contains(contract.Kinds(), f.Kind) {
		return OperatorItems{}, fmt.Errorf("%w: kind %q is not one of %s", ErrInvalidFilter, f.Kind, strings.Join(contract.Kinds(), ", "))
	}

	var items []OperatorItem
	if f.Kind == "" || f.Kind == contract.KindNotification {
		where, args := itemWhere(f, stateSQL, stateArgs, "list_name", "subject")
		q := notificationItemsSQL(where) + s.limitClause()
		err := s.eachRow(ctx, s.reads, q, append(args, f.Limit+1), func(rows *sql.Rows) error {
			it := OperatorItem{Kind: contract.KindNotification}
			if err := scanItem(rows, &it, &it.Subject); err != nil {
				return err
			}
			items = append(items, it)
			return nil
		})
		if err != nil {
			return OperatorItems{}, fmt.Errorf("list stuck and parked notifications: %w", err)
		}
	}
	if f.Kind != contract.KindNotification {
		where, args := itemWhere(f, stateSQL, stateArgs, "target", "target")
		if f.Kind != "" {
			where += " AND kind = ?"
			args = append(args, f.Kind)
		}
		q := callItemsSQL(where) + s.limitClause()
		err := s.eachRow(ctx, s.reads, q, append(args, f.Limit+1), func(rows *sql.Rows) error {
			var it OperatorItem
			if err := scanItem(rows, &it, &it.Kind); err != nil {
				return err
			}
			items = append(items, it)
			return nil
		})
		if err != nil {
			return OperatorItems{}, fmt.Errorf("list stuck and parked calls: %w", err)
		}
	}

	cutoff := f.Now.Add(-f.StuckAge)
	for i := range items {
		items[i].Stuck = items[i].Status != contract.StatusParked && items[i].CreatedAt.Before(cutoff)
	}
	slices.SortStableFunc(items, func(a, b OperatorItem) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	out := OperatorItems{Items: items}
	if len(items) > f.Limit {
		out.Items, out.More = items[:f.Limit], true
	}
	return out, nil
}

// notificationItemsSQL lists the notifications matching where, newest
// first; the status indexes give them in that order (by site too).
func notificationItemsSQL(where string) string {
	return `SELECT notification_id, source_site_id, status, list_name, subject, retry_count, last_error,
		created_at, last_attempt_at, next_attempt_at FROM notifications WHERE ` + where +
		` ORDER BY created_at DESC, notification_id`
}

// callItemsSQL lists the site_calls rows matching where, newest first.
func callItemsSQL(where string) string {
	return `SELECT operation_id, source_site_id, status, target, kind, retry_count, last_error,
		created_at, last_attempt_at, next_attempt_at FROM site_calls WHERE ` + where +
		` ORDER BY created_at DESC, operation_id`
}

// itemState is the WHERE condition selecting stuck or parked rows.
func itemState(status string, stuckBefore time.Time) (string, []any, error) {
	switch contract.Status(status) {
	case ItemsStuckOrParked:
		return `(status = 'Parked' OR (status IN ('Pending', 'Retrying') AND created_at < ?))`, []any{stuckBefore}, nil
	case ItemsStuck:
		return `status IN ('Pending', 'Retrying') AND created_at < ?`, []any{stuckBefore}, nil
	case contract.StatusPending, contract.StatusRetrying:
		return `status = ? AND created_at < ?`, []any{status, stuckBefore}, nil
	case contract.StatusParked:
		return `status = 'Parked'`, nil, nil
	}
	return "", nil, fmt.Errorf("%w: status %q is not one of Stuck, Parked, Pending, Retrying", ErrInvalidFilter, status)
}

// itemWhere adds the filters shared by both tables; targetCol is matched
// exactly by Target and queryCol by the Query substring.
func itemWhere(f ItemFilter, state string, stateArgs []any, targetCol, queryCol string) (string, []any) {
	where := []string{state}
	args := slices.Clone(stateArgs)
	if f.Site != "" {
		where, args = append(where, "source_site_id = ?"), append(args, f.Site)
	}
	if f.Target != "" {
		where, args = append(where, targetCol+" = ?"), append(args, f.Target)
	}
	if !f.CreatedFrom.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, f.CreatedFrom.UTC())
	}
	if !f.CreatedTo.IsZero() {
		where, args = append(where, "created_at < ?"), append(args, f.CreatedTo.UTC())
	}
	if f.Query != "" {
		where, args = append(where, queryCol+` LIKE ? ESCAPE '\'`), append(args, "%"+likeEscaper.Replace(f.Query)+"%")
	}
	return strings.Join(where, " AND "), args
}

// likeEscaper escapes LIKE's wildcards, and "[" which SQL Server reads as a
// character class; SQLite takes an escaped "[" literally too.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`, `[`, `\[`)

// limitClause ends an ordered query with a row limit taken from the last
// argument.
func (s *Store) limitClause() string { return s.dialect.rowLimit }

// scanItem reads the columns shared by both item queries; the fifth column
// goes to fifth (a notification's subject, a call's kind).
func scanItem(rows *sql.Rows, it *OperatorItem, fifth *string) error {
	var status string
	var created, lastAttempt, nextAttempt dbTime
	if err := rows.Scan(&it.ID, &it.Site, &status, &it.Target, fifth, &it.RetryCount, &it.LastError,
		&created, &lastAttempt, &nextAttempt); err != nil {
		return err
	}
	it.Status, it.CreatedAt = contract.Status(status), created.Time
	it.LastAttemptAt, it.NextAttemptAt = lastAttempt.ptr(), nextAttempt.ptr()
	return nil
}

// dbTime scans a time from either dialect: SQL Server and SQLite columns
// declared DATETIME arrive as time.Time, but SQLite hands back an aggregate
// (MIN) of them as the text modernc.org/sqlite wrote.
type dbTime struct {
	Time  time.Time
	Valid bool
}

// sqliteTimeLayouts are the layouts modernc.org/sqlite writes (time.Time's
// String, its default) and reads.
var sqliteTimeLayouts = []string{
	"2006-01-02 15:04:05.999999999 -0700 MST",
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02T15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
}

// Scan implements sql.Scanner.
func (t *dbTime) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*t = dbTime{}
		return nil
	case time.Time:
		*t = dbTime{Time: v.UTC(), Valid: true}
		return nil
	case []byte:
		return t.Scan(string(v))
	case string:
		for _, layout := range sqliteTimeLayouts {
			if parsed, err := time.Parse(layout, v); err == nil {
				*t = dbTime{Time: parsed.UTC(), Valid: true}
				return nil
			}
		}
		return fmt.Errorf("unrecognised time %q", v)
	}
	return fmt.Errorf("cannot scan %T as a time", v)
}

func (t dbTime) ptr() *time.Time {
	if !t.Valid {
		return nil
	}
	at := t.Time
	return &at
}

// DB is the underlying database, for read-only checks in tests and tools
// (e.g. counting rows to cross-check KPIs). Named parameters (@name with
// sql.Named) work on both dialects.
func (s *Store) DB() *sql.DB { return s.db }
