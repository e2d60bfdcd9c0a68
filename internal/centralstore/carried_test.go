package centralstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/pgserver"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

// oldTrail is a delivered call's events as audit_log stored them before
// rows carried events: one row each.
var oldTrail = []string{"call/op-1/enqueued", "call/op-1/attempt/0/1735689600000", "call/op-1/terminal/Delivered"}

// newTrailRow is a change stored the way rows are now: another call's
// park carrying the retry that parked it.
func newTrailRow(at time.Time) centralstore.AuditEvent {
	attempt := centralstore.AuditEvent{EventID: "call/op-2/attempt/2/1", OperationID: "op-2", Kind: contract.KindExternalCall,
		SiteID: "plant-1", Event: centralstore.AuditAttempt, Status: contract.StatusParked, Detail: "retry count 2: HTTP 503", At: at}
	park := attempt
	park.EventID, park.Event, park.Carries = "call/op-2/terminal/Parked/2/1", centralstore.AuditTerminal, []centralstore.AuditEvent{attempt}
	return park
}

// requireUpgradedTrails checks a store opened on an audit_log from before
// the carried column: the old rows still make their trail, and a row
// carrying an event is stored and listed whole.
func requireUpgradedTrails(t *testing.T, store *centralstore.Store) {
	t.Helper()
	ctx := context.Background()
	events, err := store.ListAuditEvents(ctx, "op-1")
	require.NoError(t, err)
	var ids []string
	for _, e := range events {
		ids = append(ids, e.EventID)
	}
	require.Equal(t, oldTrail, ids)

	row := newTrailRow(time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC))
	n, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{row})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	events, err = store.ListAuditEvents(ctx, "op-2")
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, []centralstore.AuditEventType{centralstore.AuditAttempt, centralstore.AuditTerminal},
		[]centralstore.AuditEventType{events[0].Event, events[1].Event})
}

// insertOldTrail writes oldTrail with the columns audit_log had before
// carried, placeholders written by placeholder(n).
func insertOldTrail(t *testing.T, db *sql.DB, placeholder func(n int) string) {
	t.Helper()
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range oldTrail {
		_, err := db.Exec(`INSERT INTO audit_log (event_id, operation_id, kind, event, at) VALUES (`+
			placeholder(1)+`, 'op-1', 'ExternalCall', `+placeholder(2)+`, `+placeholder(3)+`)`,
			id, []string{"Enqueued", "Attempt", "Terminal"}[i], at.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
	}
}

// A SQLite central file whose audit_log predates the carried column gets
// it on open, twice harmlessly, and its old rows still list.
func TestSQLiteAddsCarriedToOlderAuditLog(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "central.db")
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE audit_log (event_id TEXT PRIMARY KEY, operation_id TEXT NOT NULL, kind TEXT NOT NULL,
		site_id TEXT NOT NULL DEFAULT '', event TEXT NOT NULL, status TEXT NOT NULL DEFAULT '',
		detail TEXT NOT NULL DEFAULT '', operator TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
		at DATETIME NOT NULL, source_node TEXT)`)
	require.NoError(t, err)
	insertOldTrail(t, db, func(int) string { return "?" })
	require.NoError(t, db.Close())

	store, err := centralstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	requireUpgradedTrails(t, store)
	require.NoError(t, store.Close())
	store, err = centralstore.OpenSQLite(ctx, path)
	require.NoError(t, err)
	require.NoError(t, store.Close())
}

// A PostgreSQL central database whose audit_log predates the carried
// column gets it on open, and its old rows still list.
func TestPostgresAddsCarriedToOlderAuditLog(t *testing.T) {
	srv := pgserver.StartForTest(t)
	ctx := context.Background()
	require.NoError(t, srv.CreateDatabase(ctx, "central"))
	db, err := sql.Open("pgx", srv.DSN("central"))
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE audit_log (
		event_id     TEXT COLLATE "C" PRIMARY KEY,
		operation_id TEXT COLLATE "C" NOT NULL,
		kind         TEXT COLLATE "C" NOT NULL,
		site_id      TEXT COLLATE "C" NOT NULL DEFAULT '',
		event        TEXT COLLATE "C" NOT NULL,
		status       TEXT COLLATE "C" NOT NULL DEFAULT '',
		detail       TEXT COLLATE "C" NOT NULL DEFAULT '',
		operator     TEXT COLLATE "C" NOT NULL DEFAULT '',
		reason       TEXT COLLATE "C" NOT NULL DEFAULT '',
		at           TIMESTAMPTZ NOT NULL,
		source_node  TEXT COLLATE "C"
	)`)
	require.NoError(t, err)
	insertOldTrail(t, db, func(n int) string { return "$" + string(rune('0'+n)) })

	store, err := centralstore.OpenPostgres(ctx, srv.DSN("central"))
	require.NoError(t, err)
	defer store.Close()
	requireUpgradedTrails(t, store)
}

// The store's observer is told of a row's events, those it carries
// included, when the row is inserted, and of nothing when a resend finds
// it stored.
func TestObserverToldOfCarriedEventsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, err := centralstore.OpenSQLite(ctx, filepath.Join(t.TempDir(), "central.db"))
	require.NoError(t, err)
	defer store.Close()
	var told []string
	store.ObserveAudit(func(stored []centralstore.AuditEvent) {
		for _, e := range stored {
			require.Empty(t, e.Carries, "each event on its own")
			told = append(told, e.EventID)
		}
	})
	row := newTrailRow(time.Now())
	for range 2 {
		_, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{row})
		require.NoError(t, err)
	}
	require.Equal(t, []string{"call/op-2/attempt/2/1", "call/op-2/terminal/Parked/2/1"}, told)
}
