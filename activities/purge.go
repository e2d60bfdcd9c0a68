package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// purgeBatchesPerCall bounds one PurgeCentralStore call; PurgeWorkflow calls
// again while rows remain.
const purgeBatchesPerCall = 100

// Retention is how long central keeps terminal rows, by table
// (central.retention in the config file). Non-terminal rows are never purged.
type Retention struct {
	Notifications time.Duration // Delivered, Discarded
	SiteCalls     time.Duration // the site_calls mirror: Delivered, Failed, Discarded
	AuditLog      time.Duration // every audit_log row
	// PurgeBatch bounds the rows one purge transaction deletes; 1000 when 0.
	PurgeBatch int
}

// PurgeActivities delete central rows past their retention.
type PurgeActivities struct {
	Store *centralstore.Store
	// Retention is how long terminal rows are kept. A zero duration keeps
	// its table's rows.
	Retention Retention
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// PurgeCentralStore deletes terminal notifications (by terminal_at: delivery
// or discard time) and terminal site_calls rows (Delivered, Failed,
// Discarded, by terminal_at) older than their retention, and audit_log rows
// older than theirs (by at: a row's last event, so the events of a change
// go together), in transactions of Retention.PurgeBatch rows,
// up to purgeBatchesPerCall of them. It heartbeats after every batch.
func (a *PurgeActivities) PurgeCentralStore(ctx context.Context) (contract.PurgeResult, error) {
	now := utcNow(a.Now)
	batch := a.Retention.PurgeBatch
	if batch <= 0 {
		batch = 1000
	}
	res, err := a.Store.Purge(ctx, centralstore.PurgeRequest{
		NotificationsBefore: cutoff(now, a.Retention.Notifications),
		SiteCallsBefore:     cutoff(now, a.Retention.SiteCalls),
		AuditLogBefore:      cutoff(now, a.Retention.AuditLog),
		Batch:               batch,
		MaxRows:             batch * purgeBatchesPerCall,
		Progress:            func(p centralstore.PurgeResult) { activity.RecordHeartbeat(ctx, p) },
	})
	out := contract.PurgeResult{Notifications: res.Notifications, SiteCalls: res.SiteCalls, AuditLog: res.AuditLog, More: res.More}
	if err != nil {
		return out, err
	}
	activity.GetLogger(ctx).Info("purged central store", "notifications", out.Notifications,
		"siteCalls", out.SiteCalls, "auditLog", out.AuditLog, "batches", res.Batches, "more", out.More)
	return out, nil
}

// cutoff is now minus retention; zero (nothing is older) for no retention.
func cutoff(now time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	return now.Add(-retention)
}

// utcNow reads the injected clock, time.Now when nil, in UTC.
func utcNow(clock func() time.Time) time.Time {
	if clock == nil {
		return time.Now().UTC()
	}
	return clock().UTC()
}
