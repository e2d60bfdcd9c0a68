package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// browse prefills a central SQLite store with BrowseRows notifications
// (a year's status mix: mostly Delivered, some Discarded and Parked, a few
// queued; 200 sites: prefillCentral) and times pages of the list of every notification,
// one request at a time: the first page, a deep page (after the cursor at
// nine tenths of the rows), and a first page filtered by site and status.
// The baseline is a primary-key lookup of a random row of the same table,
// timed alternately with them.
func (r *run) browse(ctx context.Context) ([]Row, error) {
	n := r.opts.BrowseRows
	r.step("browse: prefill %s central notifications from %d sites", thousands(int64(n)), centralSites)
	fill, err := r.prefillCentral(ctx, "browse-central.db", n, 0)
	if err != nil {
		return nil, err
	}
	store, ids := fill.store, fill.notificationIDs
	defer store.Close()
	r.step("browse: prefilled in %s; %s requests of each kind", (fill.inserted + fill.indexed).Round(time.Second), thousands(int64(r.opts.BrowseRequests)))
	deep, err := cursorAt(ctx, store, n*9/10)
	if err != nil {
		return nil, err
	}
	pages := map[string]centralstore.NotificationFilter{
		"first":    {},
		"deep":     {After: &deep},
		"filtered": {Site: "site-007", Status: contract.StatusDelivered},
	}
	lat := map[string][]time.Duration{}
	for i := range r.opts.BrowseRequests + statusWarmUp {
		for _, name := range []string{"first", "deep", "filtered", "lookup"} {
			t0 := time.Now()
			if name == "lookup" {
				_, err = store.GetNotification(ctx, ids[rand.IntN(len(ids))])
			} else {
				_, err = store.ListNotifications(ctx, pages[name])
			}
			if err != nil {
				return nil, fmt.Errorf("browse %s: %w", name, err)
			}
			if i >= statusWarmUp {
				lat[name] = append(lat[name], time.Since(t0))
			}
		}
	}
	lookup := Figure{Name: "primary-key lookup p99, same table", Value: ms(percentile(lat["lookup"], 0.99)), Unit: "ms"}
	var rows []Row
	for _, name := range []string{"first", "deep", "filtered"} {
		row := compare(SectionBrowse, fmt.Sprintf("notification list, %s page p99, %s rows", name, thousands(int64(n))),
			ms(percentile(lat[name], 0.99)), "ms", lookup).atMost(100)
		rows = append(rows, row.withDetail("p50 %.2f ms; 50 rows a page, newest first by (created_at, notification_id); lookup p50 %.2f ms",
			ms(percentile(lat[name], 0.5)), ms(percentile(lat["lookup"], 0.5))))
	}
	return rows, nil
}

// cursorAt is the list's cursor after its first k rows, newest first.
func cursorAt(ctx context.Context, store *centralstore.Store, k int) (centralstore.Cursor, error) {
	var at time.Time
	var id string
	err := store.DB().QueryRowContext(ctx, `SELECT created_at, notification_id FROM notifications
		ORDER BY created_at DESC, notification_id DESC LIMIT 1 OFFSET ?`, max(k-1, 0)).Scan(&at, &id)
	if err != nil {
		return centralstore.Cursor{}, fmt.Errorf("cursor at row %d: %w", k, err)
	}
	return centralstore.Cursor{CreatedAt: at.UTC(), ID: id}, nil
}
