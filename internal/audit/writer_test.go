package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/workflows"
)

// central is a real central store in a SQLite file, and a second connection
// to the file that can take the audit table away and give it back.
type central struct {
	t     *testing.T
	store *centralstore.Store
	db    *sql.DB
}

func newCentral(t *testing.T) *central {
	t.Helper()
	path := filepath.Join(t.TempDir(), "central.db")
	store, err := centralstore.OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	db, err := sqlitedb.Open(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return &central{t: t, store: store, db: db}
}

// breakAudit renames audit_log away: every write fails until restoreAudit.
func (c *central) breakAudit() {
	_, err := c.db.Exec(`ALTER TABLE audit_log RENAME TO audit_log_away`)
	require.NoError(c.t, err)
}

func (c *central) restoreAudit() {
	_, err := c.db.Exec(`ALTER TABLE audit_log_away RENAME TO audit_log`)
	require.NoError(c.t, err)
}

func (c *central) ids(op string) []string {
	c.t.Helper()
	events, err := c.store.ListAuditEvents(context.Background(), op)
	require.NoError(c.t, err)
	out := []string{}
	for _, e := range events {
		out = append(out, e.EventID)
	}
	return out
}

func event(op string, n int) centralstore.AuditEvent {
	return centralstore.AuditEvent{
		EventID: fmt.Sprintf("notification/%s/attempt/%d", op, n), OperationID: op, Kind: workflows.KindNotification,
		SiteID: "plant-1", Event: centralstore.AuditAttempt, Status: workflows.StatusRetrying,
		At: t0.Add(time.Duration(n) * time.Second),
	}
}

func eventIDs(events []centralstore.AuditEvent) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, e.EventID)
	}
	return out
}

func closeWriter(t *testing.T, w *audit.Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, w.Close(ctx))
}

func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, msg)
}

// Recorded events reach the store in batches, each once.
func TestWriterWritesRecordedEvents(t *testing.T) {
	t.Parallel()
	c := newCentral(t)
	w := audit.NewWriter(c.store, audit.Options{BatchSize: 100, Delay: 5 * time.Millisecond})
	defer closeWriter(t, w)

	op := uuid.NewString()
	var events []centralstore.AuditEvent
	for i := range 250 {
		events = append(events, event(op, i))
	}
	w.Record(events[:120]...)
	w.Record(events[100:]...) // 20 recorded twice
	waitFor(t, func() bool { return w.Pending() == 0 }, "events written")
	require.Equal(t, eventIDs(events), c.ids(op))
	require.Zero(t, w.Failures())
	require.Equal(t, int64(250), w.Written())

	// Recording them again later stores nothing new.
	w.Record(events...)
	waitFor(t, func() bool { return w.Pending() == 0 }, "events rewritten")
	require.Equal(t, eventIDs(events), c.ids(op))
}

// While the store fails, writes are counted as failures and the events kept;
// once it works they are all written, once each.
func TestWriterKeepsEventsWhileTheStoreFails(t *testing.T) {
	t.Parallel()
	c := newCentral(t)
	w := audit.NewWriter(c.store, audit.Options{BatchSize: 2, Delay: time.Millisecond, RetryInterval: 10 * time.Millisecond})
	defer closeWriter(t, w)
	op := uuid.NewString()

	w.Record(event(op, 1))
	waitFor(t, func() bool { return w.Pending() == 0 }, "first event written")

	c.breakAudit()
	w.Record(event(op, 2), event(op, 3), event(op, 4))
	w.Record(event(op, 3)) // again while queued: still once
	waitFor(t, func() bool { return w.Failures() >= 3 }, "failed writes counted")
	require.Equal(t, 3, w.Pending())
	require.ErrorContains(t, w.LastError(), "audit_log")

	c.restoreAudit()
	waitFor(t, func() bool { return w.Pending() == 0 }, "kept events written after recovery")
	require.Equal(t, []string{
		"notification/" + op + "/attempt/1", "notification/" + op + "/attempt/2",
		"notification/" + op + "/attempt/3", "notification/" + op + "/attempt/4",
	}, c.ids(op))
	require.NoError(t, w.LastError())
	require.Zero(t, w.Dropped())
}

// Past MaxQueue the oldest events are dropped, and counted.
func TestWriterDropsOldestPastItsBound(t *testing.T) {
	t.Parallel()
	c := newCentral(t)
	c.breakAudit()
	w := audit.NewWriter(c.store, audit.Options{BatchSize: 10, MaxQueue: 3, Delay: time.Millisecond, RetryInterval: 10 * time.Millisecond})
	defer closeWriter(t, w)
	op := uuid.NewString()
	for i := range 5 {
		w.Record(event(op, i))
	}
	waitFor(t, func() bool { return w.Failures() > 0 && w.Dropped() == 2 && w.Pending() == 3 }, "oldest two dropped")

	c.restoreAudit()
	waitFor(t, func() bool { return w.Pending() == 0 }, "the rest written")
	require.Equal(t, eventIDs([]centralstore.AuditEvent{event(op, 2), event(op, 3), event(op, 4)}), c.ids(op))
}

// Close writes what is queued, without waiting for the batch delay; with a
// store that fails it gives up when its context ends and says so.
func TestWriterClose(t *testing.T) {
	t.Parallel()
	c := newCentral(t)
	op := uuid.NewString()
	w := audit.NewWriter(c.store, audit.Options{Delay: time.Hour})
	w.Record(event(op, 1), event(op, 2))
	closeWriter(t, w)
	require.Len(t, c.ids(op), 2)

	c.breakAudit()
	w = audit.NewWriter(c.store, audit.Options{Delay: time.Hour, RetryInterval: 10 * time.Millisecond})
	w.Record(event(op, 3))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := w.Close(ctx)
	require.ErrorContains(t, err, "1 events unwritten")
	require.Positive(t, w.Failures())
}
