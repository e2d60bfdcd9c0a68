package bench

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// centralSites are the source sites the prefilled rows come from.
const centralSites = 200

// prefillTxRows is how many rows one prefill transaction inserts: big
// enough that each commit's fsync is noise.
const prefillTxRows = 20000

// centralFill is a central SQLite store prefilled with a year of rows.
type centralFill struct {
	store *centralstore.Store
	// notificationIDs and callIDs are every tenth id of each table, for
	// primary-key lookups.
	notificationIDs, callIDs []string
	// yearStart is row 0's created_at; row i of either table was created
	// at yearStart + i*step.
	yearStart time.Time
	step      time.Duration
	// inserted is how long the bulk inserts took, indexed how long the
	// migrations then took to build the secondary indexes.
	inserted, indexed time.Duration
}

// at is when row i of a table was created.
func (f *centralFill) at(i int) time.Time { return f.yearStart.Add(time.Duration(i) * f.step) }

// prefillCentral makes a central store in file holding notifications
// notifications and calls site_calls rows: a year of them, the newest
// created now, from centralSites sites in a year's status mix. The rows go
// in in primary-key order (version 7 ids of their creation time, as sites
// make them) in big transactions with the secondary indexes dropped;
// reopening the store then lets its migrations build each index once, over
// the full table, instead of updating it row by row.
func (r *run) prefillCentral(ctx context.Context, file string, notifications, calls int) (*centralFill, error) {
	path := r.path(file)
	store, err := centralstore.OpenSQLite(ctx, path)
	if err != nil {
		return nil, err
	}
	f := &centralFill{yearStart: time.Now().UTC().Add(-365 * 24 * time.Hour)}
	f.step = 365 * 24 * time.Hour / time.Duration(max(notifications, calls))
	start := time.Now()
	err = dropSecondaryIndexes(ctx, store.DB())
	if err == nil {
		f.notificationIDs, err = fillTable(ctx, store.DB(), notifications, f, r.notificationFill())
	}
	if err == nil {
		f.callIDs, err = fillTable(ctx, store.DB(), calls, f, callFill())
	}
	store.Close()
	if err != nil {
		return nil, fmt.Errorf("prefill central: %w", err)
	}
	f.inserted = time.Since(start)
	start = time.Now()
	if f.store, err = centralstore.OpenSQLite(ctx, path); err != nil {
		return nil, fmt.Errorf("prefill central: build the indexes: %w", err)
	}
	f.indexed = time.Since(start)
	return f, nil
}

// dropSecondaryIndexes drops every index the schema declared (not the
// primary keys' own), for the migrations to build again after the inserts.
func dropSecondaryIndexes(ctx context.Context, db *sql.DB) error {
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return fmt.Errorf("list indexes: %w", err)
		}
		names = append(names, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	for _, name := range names {
		if _, err := db.ExecContext(ctx, `DROP INDEX `+name); err != nil {
			return fmt.Errorf("drop index %s: %w", name, err)
		}
	}
	return nil
}

// tableFill is how one table's prefilled rows are written.
type tableFill struct {
	table  string
	insert string
	// args are row i's values for insert.
	args func(i int, id string, at time.Time) []any
}

// fillTable inserts n rows with fill, prefillTxRows to a transaction
// through one prepared statement each, and returns every tenth id.
func fillTable(ctx context.Context, db *sql.DB, n int, f *centralFill, fill tableFill) ([]string, error) {
	ids := make([]string, 0, n/10+1)
	for done := 0; done < n; done += prefillTxRows {
		batch, err := insertBatch(ctx, db, done, min(done+prefillTxRows, n), f, fill)
		if err != nil {
			return nil, fmt.Errorf("insert %s rows %d to %d: %w", fill.table, done, min(done+prefillTxRows, n), err)
		}
		ids = append(ids, batch...)
	}
	return ids, nil
}

// insertBatch inserts rows [from, to) in one transaction.
func insertBatch(ctx context.Context, db *sql.DB, from, to int, f *centralFill, fill tableFill) ([]string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, fill.insert)
	if err != nil {
		return nil, err
	}
	var ids []string
	for i := from; i < to; i++ {
		at := f.at(i)
		id := idAt(at)
		if i%10 == 0 {
			ids = append(ids, id)
		}
		if _, err := stmt.ExecContext(ctx, fill.args(i, id, at)...); err != nil {
			return nil, err
		}
	}
	return ids, tx.Commit()
}

// idAt is a version 7 UUID of time at, as site.NewID makes at that time.
func idAt(at time.Time) string {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[0:8], uint64(at.UnixMilli())<<16|rand.Uint64()&0x0fff|0x7000)
	binary.BigEndian.PutUint64(u[8:16], rand.Uint64()&0x3fffffffffffffff|0x8000000000000000)
	return u.String()
}

// siteOf is row i's source site: the sites take turns.
func siteOf(i int) string { return fmt.Sprintf("site-%03d", i%centralSites) }

// notificationFill writes notifications of PayloadBytes bodies.
func (r *run) notificationFill() tableFill {
	body := r.body()
	return tableFill{
		table: "notifications",
		insert: `INSERT INTO notifications (notification_id, type, list_name, subject, body, type_data, status,
			retry_count, last_error, resolved_targets, source_site_id, source_instance_id, source_script, source_node,
			site_enqueued_at, created_at, last_attempt_at, next_attempt_at, delivered_at, terminal_at)
			VALUES (?, 'Email', ?, ?, ?, '{}', ?, ?, ?, '["ops@plant.example"]', ?, 'pump-3', 'trip.py', 'node-a', ?, ?, ?, ?, ?, ?)`,
		args: func(i int, id string, at time.Time) []any {
			status := yearStatus(i, false)
			o := outcomeOf(status, at)
			var delivered any
			if status == contract.StatusDelivered {
				delivered = at
			}
			return []any{id, fmt.Sprintf("list-%d", i%20), fmt.Sprintf("Pump %d tripped", i%97), body, string(status),
				o.retries, o.lastError, siteOf(i), at, at, o.lastAttempt, o.nextAttempt, delivered, o.terminal}
		},
	}
}

// callFill writes site_calls rows, ExternalCall and DatabaseWrite in turn.
func callFill() tableFill {
	kinds := []string{contract.KindExternalCall, contract.KindDatabaseWrite}
	targets := []string{"erp.createOrder", "historian"}
	return tableFill{
		table: "site_calls",
		insert: `INSERT INTO site_calls (operation_id, kind, target, status, retry_count, last_error, source_site_id,
			source_node, source_instance, source_script, created_at, updated_at, last_attempt_at, next_attempt_at,
			terminal_at, seq, mirrored_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'node-a', 'pump-3', 'trip.py', ?, ?, ?, ?, ?, ?, ?)`,
		args: func(i int, id string, at time.Time) []any {
			status := yearStatus(i, true)
			o := outcomeOf(status, at)
			return []any{id, kinds[i%2], targets[i%2], string(status), o.retries, o.lastError, siteOf(i),
				at, at, o.lastAttempt, o.nextAttempt, o.terminal, int64(i/centralSites + 1), at}
		},
	}
}

// outcome is the attempt columns of a row in a status.
type outcome struct {
	retries                            int
	lastError                          string
	lastAttempt, nextAttempt, terminal any
}

// outcomeOf is what a row in status created at at shows: terminal rows
// ended when created (the purge's clock), queued ones retry in a minute.
func outcomeOf(status contract.Status, at time.Time) outcome {
	switch status {
	case contract.StatusDelivered:
		return outcome{lastAttempt: at, terminal: at}
	case contract.StatusPending:
		return outcome{}
	case contract.StatusRetrying:
		return outcome{retries: 1, lastError: "dial tcp: connection refused", lastAttempt: at, nextAttempt: at.Add(time.Minute)}
	case contract.StatusParked:
		return outcome{retries: 3, lastError: "retries exhausted (3): connection refused", lastAttempt: at}
	}
	return outcome{retries: 3, lastError: "refused: 400 bad request", lastAttempt: at, terminal: at} // Discarded, Failed
}

// yearStatus is row i's status in a year's mix, per 1,000 rows: 1 Pending,
// 1 Retrying, 5 Parked, 20 Discarded, 10 Failed when failed is set (cached
// calls; notifications never fail) and the rest Delivered. A hash of i
// picks the slot, so that every site and every week gets its share.
func yearStatus(i int, failed bool) contract.Status {
	slot := splitmix(uint64(i)) % 1000
	switch {
	case slot == 0:
		return contract.StatusPending
	case slot == 1:
		return contract.StatusRetrying
	case slot < 7:
		return contract.StatusParked
	case slot < 27:
		return contract.StatusDiscarded
	case slot < 37 && failed:
		return contract.StatusFailed
	}
	return contract.StatusDelivered
}

// splitmix is SplitMix64's finaliser: a cheap, well-spread hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
