// Package centralstore keeps central's tables: a SQLite file by default, SQL
// Server or PostgreSQL when configured. The drivers share the SQL below and
// one test suite (storetest.Exercise).
package centralstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/dbtx"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

// ErrNotFound is returned for an id central has no row for.
var ErrNotFound = errors.New("not found")

// Notification is one row of the notifications table.
type Notification struct {
	NotificationID   string
	Type             string // contract.NotificationTypeEmail, …Teams or …Webhook: its list's when recorded
	ListName         string
	Subject          string
	Body             string
	TypeData         string // JSON: its list's per-type fields when recorded ("{}" when none)
	Status           contract.Status
	RetryCount       int
	LastError        string
	ResolvedTargets  []string
	SourceSiteID     string
	SourceInstanceID string
	SourceScript     string
	SourceNode       string
	SiteEnqueuedAt   time.Time
	CreatedAt        time.Time
	LastAttemptAt    *time.Time
	NextAttemptAt    *time.Time
	DeliveredAt      *time.Time
	// TerminalAt is when the row became Delivered or Discarded: the purge's
	// clock for notifications.
	TerminalAt *time.Time
}

// Store is central's storage.
type Store struct {
	// db takes the writes, and the reads inside them.
	db *sql.DB
	// reads takes the reads outside a write: the KPIs, the pages' lists
	// and searches.
	// On SQLite it is a pool of its own whose connections keep SQLite's
	// small default page cache (openSQLiteReads says why); on SQL Server
	// it is db.
	reads *sql.DB
	// lookups takes the point reads of a delivery (a notification's row,
	// its list: queryRowKept). On SQLite it is a pool of its own without
	// the memory map of reads (openSQLiteLookups says why); elsewhere it
	// is db.
	lookups *sql.DB
	// purges takes the purge's deletes. On SQLite it is one connection of
	// its own with a big page cache (openSQLitePurges); elsewhere it is db.
	purges  *sql.DB
	dialect dialect
	// guard notices a SQLite file removed or replaced while open; nil for
	// SQL Server.
	guard *sqlitedb.Guard
	// turn queues this process's writes to a SQLite file (one token).
	// SQLite takes one writer at a time, and a writer that finds the file
	// locked sleeps in its busy handler (1 to 100 ms a turn) instead of
	// waiting in line, so concurrent telemetry batches left the lock idle
	// between them. nil on SQL Server, which locks rows.
	turn chan struct{}
	// queue holds the telemetry batches and notification changes waiting
	// for the turn, written together (writeQueue).
	queue writeQueue
	// writeStmts and readStmts are the statements kept prepared on db and
	// on lookups (execKept, queryRowKept, queryChunk).
	writeStmts, readStmts keptStatements
	// onAudit is told of the audit events committed (ObserveAudit).
	onAudit func([]AuditEvent)
}

// writing waits for this process's turn to write a SQLite file and
// returns what gives it back. A caller whose ctx ends first gets its
// error and writes nothing: an ingest whose local activity timed out in
// the queue would otherwise still do its work, and then again on retry.
func (s *Store) writing(ctx context.Context) (done func(), err error) {
	if s.turn == nil {
		return func() {}, nil
	}
	select {
	case s.turn <- struct{}{}:
		return func() { <-s.turn }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the store's write turn: %w", ctx.Err())
	}
}

// inTx runs fn in one write transaction, in this process's turn.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	done, err := s.writing(ctx)
	if err != nil {
		return err
	}
	defer done()
	return dbtx.Run(ctx, s.db, fn)
}

// inTxWithEvents is inTx for a change that writes audit events: fn makes
// the change and returns its events, which are stored in the same
// transaction and, once it committed, told to the observer (ObserveAudit).
func (s *Store) inTxWithEvents(ctx context.Context, fn func(*sql.Tx) ([]AuditEvent, error)) error {
	var stored []AuditEvent
	err := s.inTx(ctx, s.storingEvents(ctx, fn, &stored))
	if err == nil {
		s.auditStored(stored)
	}
	return err
}

// storingEvents is fn, then the insert of the audit events fn returns in
// the same transaction; stored receives the events inserted.
func (s *Store) storingEvents(ctx context.Context, fn func(*sql.Tx) ([]AuditEvent, error), stored *[]AuditEvent) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		events, err := fn(tx)
		if err != nil {
			return err
		}
		*stored, err = s.insertAuditEvents(ctx, tx, events)
		return err
	}
}

// Ping reports whether the store answers and, on SQLite, is still the file
// it opened: /readyz fails rather than accept work into an unlinked file.
func (s *Store) Ping(ctx context.Context) error {
	if s.guard != nil {
		if err := s.guard.Check(); err != nil {
			return err
		}
	}
	return s.db.PingContext(ctx)
}

// dialect is what differs between SQLite, SQL Server and PostgreSQL.
type dialect struct {
	name string
	// readOnlyTx: the driver takes read-only transactions (snapshot).
	readOnlyTx bool
	// schema creates the tables if they do not exist.
	schema []string
	// schemaLock, when set, runs first in one transaction that then runs
	// schema, and makes another process creating the schema at once wait
	// for it. PostgreSQL's IF NOT EXISTS does not hold against a table or
	// index another session is creating: central workers starting together
	// on a new database failed on duplicate keys of its catalog.
	schemaLock string
	// insertIfMissing inserts a notification unless its id exists.
	insertIfMissing string
	// exactTimes: its time columns give back every nanosecond written
	// (SQLite's text does; SQL Server's DATETIME2 keeps 100 ns), so a row
	// just inserted is known without reading it back.
	exactTimes bool
	// upsertSiteCalls is the statements, run in order and each given the
	// same arguments, that upsert that many site_calls rows
	// (siteCallColumns each), keeping the row with the higher seq. Each
	// returns a row (operation_id, inserted: true, or false for a row
	// changed) for every row it inserted or changed, none for a row
	// skipped for its seq.
	upsertSiteCalls func(rows int) []string
	// siteCallChunk is the most rows one upsertSiteCalls statement carries,
	// set by the dialect's limit on bound parameters.
	siteCallChunk int
	// addedColumns were added to tables after their first release: migrate
	// adds them to older databases (a fresh one has them from schema).
	addedColumns []addedColumn
	// hasColumn counts the columns named (table, column): 0 or 1.
	hasColumn string
	// addColumn is the fmt format of ALTER TABLE for (table, column, definition).
	addColumn string
	// upgrades run after the added columns exist: indexes on them, backfills.
	upgrades []string
	// insertAuditEvents is one statement that inserts that many audit_log
	// rows (auditColumns each), skipping ids already stored, and returns
	// the event_id of each row it inserted.
	insertAuditEvents func(rows int) string
	// auditChunk is the most rows one insertAuditEvents statement carries.
	auditChunk int
	// deleteBatch is a statement deleting at most a limit of rows of table
	// (primary key key) matching where, which holds one "?" (the cutoff);
	// its arguments are the cutoff, then the limit.
	deleteBatch func(table, key, where string) string
	// advanceCursor sets a site's reconciled_seq (site id, seq, updated at)
	// unless the stored one is as high.
	advanceCursor string
	// placeholder, when set, numbers the placeholders: "@p" gives SQL
	// Server's @p1, "$" PostgreSQL's $1; empty keeps SQLite's "?".
	placeholder string
	// rowLimit ends an ordered query with a row limit taken from the last
	// argument (limitClause).
	rowLimit string
}

// Close closes the database.
func (s *Store) Close() error {
	err := errors.Join(s.writeStmts.close(), s.readStmts.close())
	for _, pool := range []*sql.DB{s.reads, s.lookups, s.purges} {
		if pool != s.db {
			err = errors.Join(err, pool.Close())
		}
	}
	return errors.Join(err, s.db.Close())
}

// addedColumn is a column added to an existing table.
type addedColumn struct{ table, name, definition string }

// backfillTerminalAt gives terminal notifications stored before terminal_at
// existed the best time known: delivery, else the last attempt (a discard
// follows one), else creation.
const backfillTerminalAt = `UPDATE notifications SET terminal_at = COALESCE(delivered_at, last_attempt_at, created_at)
	WHERE status IN ('Delivered', 'Discarded') AND terminal_at IS NULL`

func (s *Store) migrate(ctx context.Context) error {
	if err := s.createSchema(ctx); err != nil {
		return fmt.Errorf("create %s schema: %w", s.dialect.name, err)
	}
	for _, c := range s.dialect.addedColumns {
		if err := s.addColumn(ctx, c); err != nil {
			return fmt.Errorf("upgrade %s schema: add %s.%s: %w", s.dialect.name, c.table, c.name, err)
		}
	}
	for _, stmt := range s.dialect.upgrades {
		if _, err := s.db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("upgrade %s schema: %w", s.dialect.name, err)
		}
	}
	return nil
}

// createSchema runs the dialect's schema statements, after its schemaLock
// in one transaction when it has one.
func (s *Store) createSchema(ctx context.Context) error {
	if s.dialect.schemaLock == "" {
		return execEach(ctx, s.db, s.dialect.schema)
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		return execEach(ctx, tx, append([]string{s.dialect.schemaLock}, s.dialect.schema...))
	})
}

// execEach runs stmts in order on db, a pool or a transaction.
func execEach(ctx context.Context, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, stmts []string) error {
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// addColumn adds c unless its table has it, in one transaction so two
// processes upgrading one database at once do not both add it.
func (s *Store) addColumn(ctx context.Context, c addedColumn) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, s.bind(s.dialect.hasColumn), c.table, c.name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, fmt.Sprintf(s.dialect.addColumn, c.table, c.name, c.definition))
		return err
	})
}

// bind rewrites "?" placeholders for the dialect.
func (s *Store) bind(query string) string {
	if s.dialect.placeholder == "" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString(s.dialect.placeholder + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

const notificationColumns = `notification_id, type, list_name, subject, body, type_data, status,
	retry_count, last_error, resolved_targets, source_site_id, source_instance_id, source_script,
	source_node, site_enqueued_at, created_at, last_attempt_at, next_attempt_at, delivered_at`

// notificationReadColumns are notificationColumns and the columns a new row
// leaves NULL.
const notificationReadColumns = notificationColumns + `, terminal_at`

// InsertNotification stores n unless a row with its id exists, and returns the
// stored row either way, and whether it inserted it: resubmits are
// harmless. events (its Enqueued event) are stored in the same transaction.
func (s *Store) InsertNotification(ctx context.Context, n Notification, events ...AuditEvent) (row Notification, inserted bool, err error) {
	targets, err := json.Marshal(n.ResolvedTargets)
	if err != nil {
		return Notification{}, false, fmt.Errorf("encode resolved targets: %w", err)
	}
	err = s.writeQueued(ctx, 1, func(ctx context.Context, tx *sql.Tx) ([]AuditEvent, error) {
		res, err := s.execKept(ctx, tx, s.bind(s.dialect.insertIfMissing),
			n.NotificationID, n.Type, n.ListName, n.Subject, n.Body, n.TypeData, string(n.Status),
			n.RetryCount, n.LastError, string(targets), n.SourceSiteID, n.SourceInstanceID, n.SourceScript,
			n.SourceNode, utc(n.SiteEnqueuedAt), utc(n.CreatedAt), utcPtr(n.LastAttemptAt), utcPtr(n.NextAttemptAt),
			utcPtr(n.DeliveredAt))
		if err != nil {
			return nil, err
		}
		count, err := res.RowsAffected()
		inserted = err == nil && count == 1
		return events, nil
	})
	if err != nil {
		return Notification{}, false, fmt.Errorf("insert notification %s: %w", n.NotificationID, err)
	}
	if inserted && s.dialect.exactTimes {
		// Every notification's first write: a read less per notification.
		return insertedRow(n), true, nil
	}
	row, err = s.GetNotification(ctx, n.NotificationID)
	return row, inserted, err
}

// insertedRow is n as GetNotification reads it back once inserted: its
// times in UTC, and no terminal time (a new row leaves it NULL).
func insertedRow(n Notification) Notification {
	n.SiteEnqueuedAt, n.CreatedAt = n.SiteEnqueuedAt.UTC(), n.CreatedAt.UTC()
	n.LastAttemptAt, n.NextAttemptAt, n.DeliveredAt = utcOf(n.LastAttemptAt), utcOf(n.NextAttemptAt), utcOf(n.DeliveredAt)
	n.TerminalAt = nil
	return n
}

// utcOf is *t in UTC, or nil.
func utcOf(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	at := t.UTC()
	return &at
}

// GetNotification reads one row; ErrNotFound if there is none.
func (s *Store) GetNotification(ctx context.Context, id string) (Notification, error) {
	row, err := s.queryRowKept(ctx, s.bind(`SELECT `+notificationReadColumns+` FROM notifications WHERE notification_id = ?`), id)
	if err != nil {
		return Notification{}, fmt.Errorf("read notification %s: %w", id, err)
	}
	n, err := scanNotification(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Notification{}, fmt.Errorf("notification %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Notification{}, fmt.Errorf("read notification %s: %w", id, err)
	}
	return n, nil
}

// UpdateNotificationStatus writes a status change and its audit events in
// one transaction. A terminal row (Delivered, Discarded) never changes
// again (ErrTerminal, and no event is stored). A change to a terminal
// status sets terminal_at to u.At (the time now when u.At is zero).
func (s *Store) UpdateNotificationStatus(ctx context.Context, u contract.NotificationUpdate, events ...AuditEvent) error {
	var terminalAt any
	if u.Status.Terminal() {
		at := u.At
		if at.IsZero() {
			at = time.Now()
		}
		terminalAt = at.UTC()
	}
	return s.changeNotification(ctx, u.NotificationID, events, `UPDATE notifications
		SET status = ?, retry_count = ?, last_error = ?, last_attempt_at = ?, next_attempt_at = ?, terminal_at = ?
		WHERE notification_id = ? AND status NOT IN ('Delivered', 'Discarded')`,
		string(u.Status), u.RetryCount, u.LastError, utcPtr(u.LastAttemptAt), utcPtr(u.NextAttemptAt), terminalAt, u.NotificationID)
}

// MarkNotificationDelivered records a successful delivery and its audit
// events in one transaction.
func (s *Store) MarkNotificationDelivered(ctx context.Context, id string, at time.Time, targets []string, events ...AuditEvent) error {
	encoded, err := json.Marshal(targets)
	if err != nil {
		return fmt.Errorf("encode resolved targets: %w", err)
	}
	return s.changeNotification(ctx, id, events, `UPDATE notifications
		SET status = 'Delivered', delivered_at = ?, last_attempt_at = ?, next_attempt_at = NULL,
		    last_error = '', resolved_targets = ?, terminal_at = ?
		WHERE notification_id = ? AND status NOT IN ('Delivered', 'Discarded')`,
		utc(at), utc(at), string(encoded), utc(at), id)
}

// changeNotification runs update on notification id and stores events, in
// one transaction (which carries the other writes queued with it:
// writeQueued); an update that changed no row (the row is terminal) stores
// nothing.
func (s *Store) changeNotification(ctx context.Context, id string, events []AuditEvent, update string, args ...any) error {
	err := s.writeQueued(ctx, 1, func(ctx context.Context, tx *sql.Tx) ([]AuditEvent, error) {
		res, err := s.execKept(ctx, tx, s.bind(update), args...)
		if err != nil {
			return nil, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return nil, errors.Join(err, errUnchanged)
		}
		return events, nil
	})
	if errors.Is(err, errUnchanged) {
		return s.terminalError(ctx, id)
	}
	if err != nil {
		return fmt.Errorf("update notification %s: %w", id, err)
	}
	return nil
}

// errUnchanged rolls back a change that found no row to change.
var errUnchanged = errors.New("no row changed")

// terminalError says why a change found no row to change.
func (s *Store) terminalError(ctx context.Context, id string) error {
	current, err := s.GetNotification(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("notification %s is already %s: %w", id, current.Status, ErrTerminal)
}

// ErrTerminal is returned for a change to a row that is already terminal.
var ErrTerminal = errors.New("row is terminal")

func scanNotification(row scanner) (Notification, error) {
	var n Notification
	var status, targets string
	var enqueued, created time.Time
	var lastAttempt, nextAttempt, delivered, terminal sql.NullTime
	err := row.Scan(&n.NotificationID, &n.Type, &n.ListName, &n.Subject, &n.Body, &n.TypeData, &status,
		&n.RetryCount, &n.LastError, &targets, &n.SourceSiteID, &n.SourceInstanceID, &n.SourceScript,
		&n.SourceNode, &enqueued, &created, &lastAttempt, &nextAttempt, &delivered, &terminal)
	if err != nil {
		return Notification{}, err
	}
	n.Status = contract.Status(status)
	n.SiteEnqueuedAt, n.CreatedAt = enqueued.UTC(), created.UTC()
	n.LastAttemptAt, n.NextAttemptAt, n.DeliveredAt = timePtr(lastAttempt), timePtr(nextAttempt), timePtr(delivered)
	n.TerminalAt = timePtr(terminal)
	if err := json.Unmarshal([]byte(targets), &n.ResolvedTargets); err != nil {
		return Notification{}, fmt.Errorf("decode resolved targets: %w", err)
	}
	return n, nil
}

func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC()
}

func timePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}
