package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// browseSites are the source sites the prefilled notifications come from.
const browseSites = 200

// browse prefills a central SQLite store with BrowseRows notifications
// (a year's status mix: mostly Delivered, some Discarded and Parked, a few
// queued; 200 sites) and times pages of the list of every notification,
// one request at a time: the first page, a deep page (after the cursor at
// nine tenths of the rows), and a first page filtered by site and status.
// The baseline is a primary-key lookup of a random row of the same table,
// timed alternately with them.
func (r *run) browse(ctx context.Context) ([]Row, error) {
	n := r.opts.BrowseRows
	r.step("browse: prefill %s central notifications from %d sites", thousands(int64(n)), browseSites)
	start := time.Now()
	store, ids, err := r.prefillCentral(ctx, n)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	r.step("browse: prefilled in %s; %s requests of each kind", time.Since(start).Round(time.Second), thousands(int64(r.opts.BrowseRequests)))
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

// prefillCentral writes n notifications to a fresh central store in
// batched transactions and returns it with every tenth id (lookups).
func (r *run) prefillCentral(ctx context.Context, n int) (*centralstore.Store, []string, error) {
	store, err := centralstore.OpenSQLite(ctx, r.path("browse-central.db"))
	if err != nil {
		return nil, nil, err
	}
	year := time.Now().UTC().Add(-365 * 24 * time.Hour)
	step := 365 * 24 * time.Hour / time.Duration(n)
	var ids []string
	const batch = 2000
	for done := 0; done < n; done += batch {
		tx, err := store.DB().BeginTx(ctx, nil)
		if err != nil {
			store.Close()
			return nil, nil, err
		}
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO notifications (notification_id, type, list_name, subject, body, type_data,
			status, retry_count, last_error, resolved_targets, source_site_id, source_instance_id, source_script, source_node,
			site_enqueued_at, created_at, delivered_at, terminal_at) VALUES (?, 'Email', ?, ?, ?, '', ?, 0, '', '[]', ?, '', '', 'node-a', ?, ?, ?, ?)`)
		if err != nil {
			tx.Rollback()
			store.Close()
			return nil, nil, err
		}
		for i := done; i < min(done+batch, n); i++ {
			id := uuid.NewString()
			if i%10 == 0 {
				ids = append(ids, id)
			}
			at := year.Add(time.Duration(i) * step)
			status, terminal := yearStatus(i)
			var end any
			if terminal {
				end = at
			}
			if _, err := stmt.ExecContext(ctx, id, fmt.Sprintf("list-%d", i%20), fmt.Sprintf("Pump %d tripped", i%97), r.body(),
				string(status), fmt.Sprintf("site-%03d", i%browseSites), at, at, end, end); err != nil {
				tx.Rollback()
				store.Close()
				return nil, nil, fmt.Errorf("prefill central: %w", err)
			}
		}
		if err := tx.Commit(); err != nil {
			store.Close()
			return nil, nil, err
		}
	}
	return store, ids, nil
}

// yearStatus is row i's status in a year's mix: 97% Delivered, 2%
// Discarded, 0.5% Parked, 0.5% Retrying; and whether it is terminal.
func yearStatus(i int) (contract.Status, bool) {
	switch i % 200 {
	case 0:
		return contract.StatusParked, false
	case 1:
		return contract.StatusRetrying, false
	case 2, 3, 4, 5:
		return contract.StatusDiscarded, true
	}
	return contract.StatusDelivered, true
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
