package centralstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PurgeRequest says which rows Purge deletes. A zero cutoff deletes nothing
// from its table.
type PurgeRequest struct {
	// NotificationsBefore: Delivered and Discarded notifications whose
	// terminal_at (delivery or discard time) is before it.
	NotificationsBefore time.Time
	// SiteCallsBefore: Delivered, Failed and Discarded site_calls rows whose
	// terminal_at (the site's terminal time) is before it.
	SiteCallsBefore time.Time
	// AuditLogBefore: audit_log rows whose at is before it (a row's at is
	// the last of the events it holds: a change's events go together).
	AuditLogBefore time.Time
	// Batch is the most rows one transaction deletes. Default 1000.
	Batch int
	// MaxRows stops the purge once it has deleted this many rows in all
	// (checked between batches); 0 means no cap.
	MaxRows int
	// Progress, when set, is called with the running totals after every
	// batch (the purge activity heartbeats from it).
	Progress func(PurgeResult)
}

// PurgeResult is what a purge deleted.
type PurgeResult struct {
	Notifications, SiteCalls, AuditLog int
	// Batches is the number of delete transactions run.
	Batches int
	// More is true when MaxRows stopped the purge before every due row
	// was deleted (or could have been).
	More bool
}

func (r PurgeResult) total() int { return r.Notifications + r.SiteCalls + r.AuditLog }

// purgeTarget is one table's purge: which rows are due, by a cutoff.
type purgeTarget struct {
	table, key, where string
	before            func(PurgeRequest) time.Time
	count             func(*PurgeResult) *int
}

// purgeTargets never name Pending, Retrying or Parked: those rows stay
// whatever their age. The where clauses match the (status, terminal_at)
// indexes and audit_log's (at, source_node) (TestPurgeSeeksIndexes).
var purgeTargets = []purgeTarget{
	{
		table: "notifications", key: "notification_id",
		where:  `status IN ('Delivered', 'Discarded') AND terminal_at < ?`,
		before: func(r PurgeRequest) time.Time { return r.NotificationsBefore },
		count:  func(r *PurgeResult) *int { return &r.Notifications },
	},
	{
		table: "site_calls", key: "operation_id",
		where:  `status IN ('Delivered', 'Failed', 'Discarded') AND terminal_at < ?`,
		before: func(r PurgeRequest) time.Time { return r.SiteCallsBefore },
		count:  func(r *PurgeResult) *int { return &r.SiteCalls },
	},
	{
		table: "audit_log", key: "event_id",
		where:  `at < ?`,
		before: func(r PurgeRequest) time.Time { return r.AuditLogBefore },
		count:  func(r *PurgeResult) *int { return &r.AuditLog },
	},
}

// Purge deletes the rows req names, table by table, in transactions of at
// most req.Batch rows (one DELETE each), until none is left or req.MaxRows
// is reached. What was deleted stays deleted when it fails part way.
func (s *Store) Purge(ctx context.Context, req PurgeRequest) (PurgeResult, error) {
	if req.Batch <= 0 {
		req.Batch = 1000
	}
	var res PurgeResult
	for _, t := range purgeTargets {
		cutoff := t.before(req)
		if cutoff.IsZero() {
			continue
		}
		stmt := s.bind(s.dialect.deleteBatch(t.table, t.key, t.where))
		for {
			if req.MaxRows > 0 && res.total() >= req.MaxRows {
				res.More = true
				return res, nil
			}
			limit := req.Batch
			if req.MaxRows > 0 {
				limit = min(limit, req.MaxRows-res.total())
			}
			r, err := s.deleteBatch(ctx, stmt, cutoff, limit)
			if err != nil {
				return res, fmt.Errorf("purge %s before %s: %w", t.table, cutoff.UTC().Format(time.RFC3339), err)
			}
			n, err := r.RowsAffected()
			if err != nil {
				return res, fmt.Errorf("purge %s: count deleted rows: %w", t.table, err)
			}
			res.Batches++
			*t.count(&res) += int(n)
			if req.Progress != nil {
				req.Progress(res)
			}
			if int(n) < limit {
				break
			}
		}
	}
	return res, nil
}

// deleteBatch runs one purge statement in this process's write turn.
func (s *Store) deleteBatch(ctx context.Context, stmt string, cutoff time.Time, limit int) (sql.Result, error) {
	done, err := s.writing(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return s.purges.ExecContext(ctx, stmt, cutoff.UTC(), limit)
}
