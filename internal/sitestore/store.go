// Package sitestore is the site's durable store: the buffer of operations not
// yet handed to central, each born with its HLC timestamp and hash-chain link.
package sitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/dbtx"
	"github.com/outpost-dev/outpost/internal/hlc"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

// ErrNotFound is returned for an id the buffer does not hold.
var ErrNotFound = errors.New("not in the site buffer")

// Provenance says where an operation came from.
type Provenance struct {
	SiteID   string
	Node     string
	Instance string
	Script   string
}

// NewMessage is an operation to buffer.
type NewMessage struct {
	ID string
	// Category is the operation's kind (contract.KindNotification, …).
	Category           string
	TrackedOperationID string // cached calls only
	Target             string
	Payload            []byte
	Provenance         Provenance
	// NotBefore delays the first hand-off; zero means at once.
	NotBefore time.Time
	// RequestHash, set when the caller gave an idempotency key (ID is then
	// derived from it), identifies the request: the same key and hash
	// again is the same operation, a different hash is refused.
	RequestHash []byte
	// TraceParent is the W3C traceparent of the call that buffered the
	// operation, which its hand-off continues; empty when not traced.
	TraceParent string
}

// Message is a buffered operation (the operation's message, plus the
// forwarder's schedule and the air-gap fields: HLC and chain link).
type Message struct {
	NewMessage
	Status        contract.Status
	RetryCount    int
	LastError     string
	CreatedAt     time.Time
	LastAttemptAt *time.Time
	NextAttemptAt time.Time
	HLC           hlc.Timestamp
	PayloadHash   []byte
	PrevLink      []byte
	Link          []byte
	// Replayed is set on a message whose idempotency key was already
	// accepted with the same request: nothing new was written.
	Replayed bool
}

// Store is the site SQLite file.
type Store struct {
	db  *sql.DB
	now func() time.Time
	// guard notices the file being removed or replaced under the store.
	guard *sqlitedb.Guard
	// writer commits every change to the file, batching concurrent ones.
	writer *committer
	// reads are the statements of the most frequent reads, prepared once.
	reads *readStatements
	// changed is signalled after every committed tracking change.
	changed chan struct{}
}

// Options configures a Store.
type Options struct {
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// CommitBatch is the most buffer rows one group commit holds;
	// DefaultCommitBatch when 0.
	CommitBatch int
	// CommitDelay is the longest a write waits for others to share its
	// commit; DefaultCommitDelay when 0.
	CommitDelay time.Duration
}

// migrations bring a site file up to date, in order; PRAGMA user_version
// counts those applied. Append, never edit: files in the field ran them.
var migrations = []string{
	// 1: the buffer and the per-node clock and chain head.
	`CREATE TABLE IF NOT EXISTS buffer (
		message_id           TEXT PRIMARY KEY,
		category             TEXT NOT NULL,
		tracked_operation_id TEXT NOT NULL DEFAULT '',
		target               TEXT NOT NULL,
		payload              BLOB NOT NULL,
		status               TEXT NOT NULL,
		retry_count          INTEGER NOT NULL DEFAULT 0,
		last_error           TEXT NOT NULL DEFAULT '',
		created_at           INTEGER NOT NULL, -- Unix nanoseconds, UTC
		last_attempt_at      INTEGER,
		next_attempt_at      INTEGER NOT NULL,
		site_id              TEXT NOT NULL,
		node                 TEXT NOT NULL,
		instance             TEXT NOT NULL DEFAULT '',
		script               TEXT NOT NULL DEFAULT '',
		hlc                  TEXT NOT NULL,
		payload_hash         BLOB NOT NULL,
		prev_link            BLOB NOT NULL,
		link                 BLOB NOT NULL
	);
	CREATE INDEX IF NOT EXISTS buffer_due ON buffer (next_attempt_at, hlc);
	-- chain holds each node's clock and chain head; buffer rows are deleted on
	-- hand-off, so the head cannot be read from them.
	CREATE TABLE IF NOT EXISTS chain (
		node     TEXT PRIMARY KEY,
		last_hlc TEXT NOT NULL,
		head     BLOB NOT NULL
	);`,
	// 2: cached calls. A cached call's buffer row stays after hand-off (its
	// payload is what the site delivers), marked handed_off so the forwarder
	// skips it. tracking is the status record of every cached call; seq is a
	// site-wide change counter (meta.tracking_seq) for telemetry and
	// reconciliation cursors.
	`ALTER TABLE buffer ADD COLUMN handed_off INTEGER NOT NULL DEFAULT 0;
	DROP INDEX buffer_due;
	CREATE INDEX buffer_due ON buffer (handed_off, next_attempt_at, hlc);
	CREATE INDEX buffer_operation ON buffer (tracked_operation_id) WHERE tracked_operation_id != '';
	CREATE TABLE tracking (
		operation_id    TEXT PRIMARY KEY,
		kind            TEXT NOT NULL,
		target          TEXT NOT NULL,
		status          TEXT NOT NULL,
		retry_count     INTEGER NOT NULL DEFAULT 0,
		last_error      TEXT NOT NULL DEFAULT '',
		site_id         TEXT NOT NULL,
		node            TEXT NOT NULL,
		instance        TEXT NOT NULL DEFAULT '',
		script          TEXT NOT NULL DEFAULT '',
		created_at      INTEGER NOT NULL, -- Unix nanoseconds, UTC
		updated_at      INTEGER NOT NULL,
		last_attempt_at INTEGER,
		next_attempt_at INTEGER,
		terminal_at     INTEGER,
		seq             INTEGER NOT NULL
	);
	CREATE UNIQUE INDEX tracking_seq ON tracking (seq);
	CREATE INDEX tracking_terminal ON tracking (terminal_at) WHERE terminal_at IS NOT NULL;
	CREATE TABLE meta (
		name  TEXT PRIMARY KEY,
		value INTEGER NOT NULL
	);
	INSERT INTO meta (name, value) VALUES ('tracking_seq', 0), ('telemetry_cursor', 0);`,
	// 3: the site retries cached calls itself while central is away; it
	// finds the due ones by their next attempt.
	`CREATE INDEX tracking_due ON tracking (next_attempt_at) WHERE status IN ('Pending', 'Retrying');`,
	// 4: the job log, apart from the buffer so hand-off deletes nothing the
	// chain needs (see joblog.go); each node's checkpoint is where its
	// remaining chain starts (rows buffered before this version are not in
	// the log, so it starts at today's head); and idempotency keys.
	`CREATE TABLE job_log (
		seq          INTEGER PRIMARY KEY,
		node         TEXT NOT NULL,
		job_id       TEXT NOT NULL,
		kind         TEXT NOT NULL,
		hlc          TEXT NOT NULL,
		payload      BLOB NOT NULL,
		payload_hash BLOB NOT NULL,
		prev_link    BLOB NOT NULL,
		link         BLOB NOT NULL,
		enqueued_at  INTEGER NOT NULL,
		exported_at  INTEGER,
		acked        INTEGER NOT NULL DEFAULT 0, -- 1 handed off online, 2 by an air-gap receipt
		acked_at     INTEGER,
		central_status TEXT NOT NULL DEFAULT '' -- what the receipt said central had
	);
	CREATE INDEX job_log_job ON job_log (job_id);
	ALTER TABLE chain ADD COLUMN checkpoint_link BLOB NOT NULL DEFAULT x'';
	ALTER TABLE chain ADD COLUMN checkpoint_hlc TEXT NOT NULL DEFAULT '';
	UPDATE chain SET checkpoint_link = head, checkpoint_hlc = last_hlc;
	CREATE TABLE idempotency_keys (
		operation_id TEXT PRIMARY KEY,
		request_hash BLOB NOT NULL,
		created_at   INTEGER NOT NULL
	);`,
	// 5: every air-gap export and ack of this file, for the site's airgap_*
	// metrics: the CLI that runs them is a process of its own, so the
	// daemon reads them from here at scrape time (see airgap.go).
	`CREATE TABLE airgap_transfers (
		seq              INTEGER PRIMARY KEY,
		kind             TEXT NOT NULL,    -- 'export' or 'ack'
		bundle_id        TEXT NOT NULL,    -- the bundle written, or the receipt acked
		entries          INTEGER NOT NULL, -- the bundle's entries, or the operations the receipt names
		new_entries      INTEGER NOT NULL, -- see Transfer.NewEntries
		bytes            INTEGER NOT NULL, -- the file's size
		duration_seconds REAL NOT NULL,
		at               INTEGER NOT NULL, -- Unix nanoseconds, UTC
		clock_refused    INTEGER NOT NULL DEFAULT 0 -- an ack whose receipt's clock was too far ahead (1)
	);`,
	// 6: a random number naming this file, so the site daemon tells the
	// pollers of its own earlier runs from another daemon's (StoreID).
	`INSERT INTO meta (name, value) VALUES ('store_id', random());`,
	// Every tracking change, as the row stood after it, until central has
	// it: telemetry sends each change, not only a row's latest state, so
	// central audits every attempt even when telemetry falls behind.
	`CREATE TABLE tracking_changes (
		operation_id    TEXT NOT NULL,
		kind            TEXT NOT NULL,
		target          TEXT NOT NULL,
		status          TEXT NOT NULL,
		retry_count     INTEGER NOT NULL,
		last_error      TEXT NOT NULL,
		site_id         TEXT NOT NULL,
		node            TEXT NOT NULL,
		instance        TEXT NOT NULL,
		script          TEXT NOT NULL,
		created_at      INTEGER NOT NULL,
		updated_at      INTEGER NOT NULL,
		last_attempt_at INTEGER,
		next_attempt_at INTEGER,
		terminal_at     INTEGER,
		seq             INTEGER PRIMARY KEY -- the change number
	);
	INSERT INTO tracking_changes SELECT operation_id, kind, target, status, retry_count, last_error, site_id, node,
		instance, script, created_at, updated_at, last_attempt_at, next_attempt_at, terminal_at, seq
		FROM tracking WHERE seq > (SELECT value FROM meta WHERE name = 'telemetry_cursor');`,
	// 8: replication to a standby node (replication.go): whether this file
	// records its changes, its place in the stream (the last change and the
	// rolling checksum through it) and this node's epoch. One row, never
	// replicated itself.
	`CREATE TABLE replication (
		id            INTEGER PRIMARY KEY CHECK (id = 1),
		enabled       INTEGER NOT NULL DEFAULT 0,
		change_number INTEGER NOT NULL DEFAULT 0,
		checksum      BLOB NOT NULL DEFAULT x'',
		epoch         INTEGER NOT NULL DEFAULT 0
	);
	INSERT INTO replication (id) VALUES (1);`,
	// 9: parked_on_site marks a row central refused for good
	// (ParkUnforwardable): a call's buffer row mirrors its tracking status,
	// Parked included, so the status cannot tell them apart. Rows parked on
	// the site by earlier versions are tried once more (a notification's
	// row is Parked only that way; a call's says so in its last error):
	// those versions also parked hand-offs central accepts once it is set
	// up. A row central still refuses for good is parked again by the next
	// pass. The index finds what is parked on the site (ListParkedOnSite).
	`ALTER TABLE buffer ADD COLUMN parked_on_site INTEGER NOT NULL DEFAULT 0;
	UPDATE buffer SET handed_off = 0, next_attempt_at = 0,
		status = coalesce((SELECT t.status FROM tracking t WHERE t.operation_id = buffer.tracked_operation_id), 'Retrying')
		WHERE status = 'Parked' AND (category = 'Notification' OR last_error LIKE 'central refused it for good%');
	CREATE INDEX buffer_parked_on_site ON buffer (created_at) WHERE parked_on_site = 1;`,
	// 10: central's record of an operation as the newest receipt carried it
	// (central_status has its status): retry count, last attempt and
	// delivery, and that receipt's time (Unix nanoseconds), so an older
	// receipt acked later does not take the state back.
	`ALTER TABLE job_log ADD COLUMN central_retry_count INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE job_log ADD COLUMN central_last_attempt_at INTEGER;
	ALTER TABLE job_log ADD COLUMN central_delivered_at INTEGER;
	ALTER TABLE job_log ADD COLUMN central_at INTEGER;`,
	// 11: who submitted each cached call (the site API token's holder),
	// which central records as the operator of its Enqueued audit event.
	`ALTER TABLE tracking ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';
	ALTER TABLE tracking_changes ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';`,
	// 12: the trace context (W3C traceparent) of the call that buffered a
	// row, so its hand-off, after a restart too, continues the caller's trace.
	`ALTER TABLE buffer ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';`,
	// 13: tracking keyed by its operation id alone (WITHOUT ROWID). A rowid
	// table found a call's row in two B-trees (the primary key's index,
	// then the table) and a Status request then finds its buffer row in two
	// more; on a store of 5,000,000 calls each descent is a leaf page the
	// page cache rarely holds (outpost bench, growth section: Status p99
	// 1.14-1.29x the empty store's in four runs before, 1.04-1.18x in five
	// after). The rows are copied once, in this migration's transaction
	// (about 3 s for 1,000,000 rows); the columns keep their order, which a
	// standby's full copy (Restore) relies on.
	`CREATE TABLE tracking_keyed (
		operation_id    TEXT NOT NULL PRIMARY KEY,
		kind            TEXT NOT NULL,
		target          TEXT NOT NULL,
		status          TEXT NOT NULL,
		retry_count     INTEGER NOT NULL DEFAULT 0,
		last_error      TEXT NOT NULL DEFAULT '',
		site_id         TEXT NOT NULL,
		node            TEXT NOT NULL,
		instance        TEXT NOT NULL DEFAULT '',
		script          TEXT NOT NULL DEFAULT '',
		created_at      INTEGER NOT NULL, -- Unix nanoseconds, UTC
		updated_at      INTEGER NOT NULL,
		last_attempt_at INTEGER,
		next_attempt_at INTEGER,
		terminal_at     INTEGER,
		seq             INTEGER NOT NULL,
		submitted_by    TEXT NOT NULL DEFAULT ''
	) WITHOUT ROWID;
	INSERT INTO tracking_keyed SELECT operation_id, kind, target, status, retry_count, last_error, site_id, node,
		instance, script, created_at, updated_at, last_attempt_at, next_attempt_at, terminal_at, seq, submitted_by
		FROM tracking;
	DROP TABLE tracking;
	ALTER TABLE tracking_keyed RENAME TO tracking;
	CREATE UNIQUE INDEX tracking_seq ON tracking (seq);
	CREATE INDEX tracking_terminal ON tracking (terminal_at) WHERE terminal_at IS NOT NULL;
	CREATE INDEX tracking_due ON tracking (next_attempt_at) WHERE status IN ('Pending', 'Retrying');`,
}

// Open opens (creating if needed) the site store at path.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	db, err := sqlitedb.Open(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("site store: %w", err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("site store %s: %w", path, err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CommitBatch == 0 {
		opts.CommitBatch = DefaultCommitBatch
	}
	if opts.CommitDelay == 0 {
		opts.CommitDelay = DefaultCommitDelay
	}
	guard, err := sqlitedb.NewGuard(path)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("site store: %w", err)
	}
	writer, err := newCommitter(ctx, db, opts.CommitBatch, opts.CommitDelay, guard.Check)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("site store %s: %w", path, err)
	}
	var replicates bool
	if err := db.QueryRowContext(ctx, `SELECT enabled FROM replication`).Scan(&replicates); err != nil {
		writer.close()
		db.Close()
		return nil, fmt.Errorf("site store %s: %w", path, err)
	}
	writer.repl.enabled.Store(replicates)
	reads, err := prepareReadStatements(ctx, db)
	if err != nil {
		writer.close()
		db.Close()
		return nil, fmt.Errorf("site store %s: %w", path, err)
	}
	return &Store{db: db, now: opts.Now, guard: guard, writer: writer, reads: reads, changed: make(chan struct{}, 1)}, nil
}

// migrate applies the migrations the file has not run yet, each in its own
// transaction with the version bump, so a crash never half-applies one.
func migrate(ctx context.Context, db *sql.DB) error {
	for done := false; !done; {
		err := dbtx.Run(ctx, db, func(tx *sql.Tx) error {
			var version int
			if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
				return fmt.Errorf("read version: %w", err)
			}
			if done = version >= len(migrations); done {
				return nil
			}
			if _, err := tx.ExecContext(ctx, migrations[version]); err != nil {
				return fmt.Errorf("to version %d: %w", version+1, err)
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, version+1))
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	return nil
}

// Close stops the writer and closes the file.
func (s *Store) Close() error {
	s.writer.close()
	s.reads.close()
	return s.db.Close()
}

// Commits is how many transactions the store's writer has committed: with
// concurrent callers, far fewer than the writes they carried.
func (s *Store) Commits() int64 { return s.writer.commits.Load() }

// Enqueue commits msgs to the buffer, each with its HLC timestamp and chain
// link, and returns them as stored. Concurrent calls share a commit; when
// Enqueue returns nil every message is on disk.
func (s *Store) Enqueue(ctx context.Context, msgs ...NewMessage) ([]Message, error) {
	var stored []Message
	if err := s.writer.submit(ctx, s.enqueueWrite(ctx, msgs, &stored)); err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	return stored, nil
}

// enqueueWrite is the writer's write of Enqueue; stored receives msgs as
// stored.
func (s *Store) enqueueWrite(ctx context.Context, msgs []NewMessage, stored *[]Message) *write {
	return &write{ctx: ctx, rows: len(msgs), fn: s.appendWrite(msgs, stored), appends: true, done: make(chan error, 1)}
}

// appendWrite is the write that appends msgs to the buffer; stored receives
// them as stored.
func (s *Store) appendWrite(msgs []NewMessage, stored *[]Message) func(*writeTx) error {
	hashes := payloadHashes(msgs) // here, in the caller's goroutine: the writer is the bottleneck
	return func(tx *writeTx) (err error) {
		*stored, err = appendMessages(tx, s.now().UTC(), msgs, hashes)
		return err
	}
}

func payloadHashes(msgs []NewMessage) [][]byte {
	hashes := make([][]byte, len(msgs))
	for i, m := range msgs {
		hashes[i] = hlc.PayloadHash(m.Payload)
	}
	return hashes
}

// appendMessages inserts msgs (whose payload hashes are hashes) in tx, each
// with its HLC timestamp and chain link, advancing the batch's chain heads.
func appendMessages(tx *writeTx, now time.Time, msgs []NewMessage, hashes [][]byte) ([]Message, error) {
	stored := make([]Message, 0, len(msgs))
	for i, m := range msgs {
		if replayed, err := claimKey(tx, m, now); err != nil || replayed {
			if err != nil {
				return nil, err
			}
			stored = append(stored, Message{NewMessage: m, Replayed: true})
			continue
		}
		head, err := loadHead(tx, m.Provenance.Node)
		if err != nil {
			return nil, err
		}
		msg := head.append(m, hashes[i], now)
		if err := tx.insertAppended(msg); err != nil {
			return nil, err
		}
		tx.heads[m.Provenance.Node] = head
		stored = append(stored, msg)
	}
	return stored, nil
}

// insertAppended inserts msg's buffer row and job-log entry, or, while an
// enqueue's write runs (writeTx.run), keeps msg for a multi-row insert of
// appendChunk rows.
func (tx *writeTx) insertAppended(msg Message) error {
	if !tx.appending {
		if err := insertMessage(tx, msg); err != nil {
			return err
		}
		return insertJobLogEntry(tx, msg)
	}
	tx.appended = append(tx.appended, msg)
	if len(tx.appended) < appendChunk {
		return nil
	}
	return tx.flushAppended()
}

// flushAppended inserts the rows kept by insertAppended, by one statement
// for their buffer rows and one for their job-log entries. Its error is an
// *appendedRowsError: the rows are of several writes.
func (tx *writeTx) flushAppended() error {
	msgs := tx.appended
	if len(msgs) == 0 {
		return nil
	}
	tx.appended = tx.appended[:0]
	buffer, jobLog, err := tx.stmts.appendStatements(tx.ctx, len(msgs))
	if err != nil {
		return &appendedRowsError{fmt.Errorf("insert %d enqueued rows: %w", len(msgs), err)}
	}
	bufferRows := make([]any, 0, len(msgs)*bufferColumns)
	jobLogRows := make([]any, 0, len(msgs)*jobLogColumns)
	for _, m := range msgs {
		ts := m.HLC.String()
		bufferRows = appendBufferArgs(bufferRows, m, ts)
		jobLogRows = appendJobLogArgs(jobLogRows, m, ts)
	}
	if _, err := tx.execPrepared(buffer.stmt, buffer.query, bufferRows...); err != nil {
		return &appendedRowsError{fmt.Errorf("insert %d enqueued rows: %w", len(msgs), err)}
	}
	if _, err := tx.execPrepared(jobLog.stmt, jobLog.query, jobLogRows...); err != nil {
		return &appendedRowsError{fmt.Errorf("append %d enqueued rows to the job log: %w", len(msgs), err)}
	}
	return nil
}

// chainHead is a node's clock and last link, advanced in memory by a batch
// and saved before it commits.
type chainHead struct {
	last hlc.Timestamp
	link []byte
}

// loadHead is node's chain head as the batch left it, read from the file
// on the batch's first row of that node.
func loadHead(tx *writeTx, node string) (chainHead, error) {
	if h, ok := tx.heads[node]; ok {
		return h, nil
	}
	h := chainHead{link: []byte{}}
	var last string
	err := tx.stmt(tx.stmts.readHead).QueryRowContext(tx.ctx, node).Scan(&last, &h.link)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return chainHead{}, fmt.Errorf("read chain head of node %s: %w", node, err)
	default:
		if h.last, err = hlc.Parse(last); err != nil {
			return chainHead{}, fmt.Errorf("chain head of node %s: %w", node, err)
		}
		if h.link == nil {
			h.link = []byte{} // an empty blob scans as nil; a first entry's prev_link is empty, not NULL
		}
	}
	return h, nil
}

// append stamps m with the next HLC timestamp and link, and advances h.
func (h *chainHead) append(m NewMessage, payloadHash []byte, now time.Time) Message {
	ts := hlc.Next(h.last, now.UnixMilli())
	link := hlc.Link(h.link, m.ID, ts, payloadHash)
	next := now
	if m.NotBefore.After(now) {
		next = m.NotBefore.UTC()
	}
	msg := Message{
		NewMessage: m, Status: contract.StatusPending, CreatedAt: now, NextAttemptAt: next,
		HLC: ts, PayloadHash: payloadHash, PrevLink: h.link, Link: link,
	}
	h.last, h.link = ts, link
	return msg
}

const (
	readHeadSQL = `SELECT last_hlc, head FROM chain WHERE node = ?`
	saveHeadSQL = `INSERT INTO chain (node, last_hlc, head) VALUES (?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET last_hlc = excluded.last_hlc, head = excluded.head`
)

// saveHeads writes the chain heads the batch advanced.
func saveHeads(tx *writeTx) error {
	for node, h := range tx.heads {
		_, err := tx.execPrepared(tx.stmts.saveHead, saveHeadSQL, node, h.last.String(), h.link)
		if err != nil {
			return fmt.Errorf("save chain head of node %s: %w", node, err)
		}
	}
	return nil
}

// insertBufferSQL inserts one buffer row; insertBufferRowSQL is the row's
// values, which a multi-row insert repeats (appendChunk).
const (
	insertBufferSQL = `INSERT INTO buffer (message_id, category, tracked_operation_id, target, payload,
	status, created_at, next_attempt_at, site_id, node, instance, script, hlc, payload_hash, prev_link, link, trace_parent)
	VALUES ` + insertBufferRowSQL
	insertBufferRowSQL = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

func insertMessage(tx *writeTx, m Message) error {
	_, err := tx.execPrepared(tx.stmts.insertBuffer, insertBufferSQL, appendBufferArgs(nil, m, m.HLC.String())...)
	if err != nil {
		return fmt.Errorf("insert %s %s: %w", m.Category, m.ID, err)
	}
	return nil
}

// bufferColumns is how many values a buffer row has in insertBufferSQL.
var bufferColumns = strings.Count(insertBufferRowSQL, "?")

// appendBufferArgs appends the values of m's buffer row, whose HLC
// timestamp as text is ts, to args.
func appendBufferArgs(args []any, m Message, ts string) []any {
	return append(args, m.ID, m.Category, m.TrackedOperationID, m.Target, m.Payload,
		m.Status, m.CreatedAt.UnixNano(), m.NextAttemptAt.UnixNano(), m.Provenance.SiteID, m.Provenance.Node,
		m.Provenance.Instance, m.Provenance.Script, ts, m.PayloadHash, m.PrevLink, m.Link, m.TraceParent)
}

const messageColumns = `message_id, category, tracked_operation_id, target, payload, status, retry_count,
	last_error, created_at, last_attempt_at, next_attempt_at, site_id, node, instance, script, hlc,
	payload_hash, prev_link, link, trace_parent`

// DueCursor is where a sweep over due messages has got to: the order key
// of the last message it read.
type DueCursor struct {
	NextAttemptAt int64
	HLC           string
	MessageID     string
}

// Cursor is m's place in due order.
func (m Message) Cursor() DueCursor {
	return DueCursor{NextAttemptAt: m.NextAttemptAt.UnixNano(), HLC: m.HLC.String(), MessageID: m.ID}
}

// Due returns up to limit messages whose next attempt is due at now, oldest
// (in HLC order) first.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]Message, error) {
	return s.DueAfter(ctx, now, DueCursor{}, limit)
}

// DueAfter is Due from after on: a sweep reads the backlog a page at a
// time, never holding more than one page, and never rereads a row it
// already has in hand.
func (s *Store) DueAfter(ctx context.Context, now time.Time, after DueCursor, limit int) ([]Message, error) {
	rows, err := s.reads.due.QueryContext(ctx, now.UnixNano(), after.NextAttemptAt, after.HLC, after.MessageID, limit)
	if err != nil {
		return nil, fmt.Errorf("read due messages: %w", err)
	}
	defer rows.Close()
	var msgs []Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("read due messages: %w", err)
		}
		msgs = append(msgs, m)
	}
	return msgs, rows.Err()
}

// Get returns one buffered message; ErrNotFound when it is not buffered.
func (s *Store) Get(ctx context.Context, id string) (Message, error) {
	m, err := scanMessage(s.db.QueryRowContext(ctx, `SELECT `+messageColumns+` FROM buffer WHERE message_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Message{}, fmt.Errorf("message %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Message{}, fmt.Errorf("read message %s: %w", id, err)
	}
	return m, nil
}

// MarkHandedOff notes that central acknowledged cached calls: their rows stay
// (the site delivers from them) but are no longer forwarded.
// Their job-log entries are acknowledged.
func (s *Store) MarkHandedOff(ctx context.Context, ids ...string) error {
	return s.inOneTx(ctx, "mark handed-off calls", ids, `UPDATE buffer SET handed_off = 1 WHERE message_id = :id`, ackOnlineSQL)
}

// Delete removes handed-off messages and acknowledges their job-log entries.
func (s *Store) Delete(ctx context.Context, ids ...string) error {
	return s.inOneTx(ctx, "delete handed-off messages", ids, `DELETE FROM buffer WHERE message_id = :id`, ackOnlineSQL)
}

// inOneTx runs each of stmts once per id in one write.
func (s *Store) inOneTx(ctx context.Context, what string, ids []string, stmts ...string) error {
	now := s.now().UnixNano()
	return s.inTx(ctx, what, func(tx *writeTx) error {
		for _, id := range ids {
			for _, stmt := range stmts {
				if _, err := tx.exec(stmt, sql.Named("id", id), sql.Named("now", now)); err != nil {
					return fmt.Errorf("%s: %w", id, err)
				}
			}
		}
		return nil
	})
}

// RecordFailedAttempt notes a failed hand-off and schedules the next one.
func (s *Store) RecordFailedAttempt(ctx context.Context, id string, at, next time.Time, reason string) error {
	return s.inTx(ctx, "record failed hand-off of "+id, func(tx *writeTx) error {
		_, err := tx.exec(`UPDATE buffer SET status = ?, retry_count = retry_count + 1,
			last_error = ?, last_attempt_at = ?, next_attempt_at = ? WHERE message_id = ?`,
			string(contract.StatusRetrying), reason, at.UnixNano(), next.UnixNano(), id)
		return err
	})
}

// Depth is the number of buffered messages.
func (s *Store) Depth(ctx context.Context) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM buffer`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count buffered messages: %w", err)
	}
	return n, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanMessage(row scanner) (Message, error) {
	var m Message
	var created, next int64
	var lastAttempt sql.NullInt64
	var ts string
	err := row.Scan(&m.ID, &m.Category, &m.TrackedOperationID, &m.Target, &m.Payload, &m.Status, &m.RetryCount,
		&m.LastError, &created, &lastAttempt, &next, &m.Provenance.SiteID, &m.Provenance.Node,
		&m.Provenance.Instance, &m.Provenance.Script, &ts, &m.PayloadHash, &m.PrevLink, &m.Link, &m.TraceParent)
	if err != nil {
		return Message{}, err
	}
	m.CreatedAt, m.NextAttemptAt = time.Unix(0, created).UTC(), time.Unix(0, next).UTC()
	m.LastAttemptAt = timeOf(lastAttempt)
	if m.HLC, err = hlc.Parse(ts); err != nil {
		return Message{}, err
	}
	return m, nil
}

// RescheduleAhead makes due now the rows not handed off whose next attempt
// is more than ahead past now, and returns how many. Rows are scheduled by
// the wall clock: one written while the clock ran ahead would otherwise
// wait, after the clock is set right, for as long as it was wrong. Nothing
// legitimately waits longer than ahead (a forward interval, an immediate
// attempt's grace), so such a row is the clock's doing. The check is a read
// on the schedule index; the write happens only when there are rows.
func (s *Store) RescheduleAhead(ctx context.Context, now time.Time, ahead time.Duration) (int, error) {
	limit := now.Add(ahead).UnixNano()
	var found int
	err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM buffer WHERE handed_off = 0 AND next_attempt_at > ?)`, limit).Scan(&found)
	if err != nil || found == 0 {
		return 0, err
	}
	var n int64
	err = s.inTx(ctx, "reschedule rows ahead of the clock", func(tx *writeTx) (err error) {
		n, err = tx.execCount(`UPDATE buffer SET next_attempt_at = ? WHERE handed_off = 0 AND next_attempt_at > ?`, now.UnixNano(), limit)
		return err
	})
	return int(n), err
}

// ClockLead is how far the latest timestamp this store issued is ahead of
// now: more than zero when the wall clock was set back (or ran ahead
// before). Operations keep their order (the HLC never goes back), but ages
// and schedules read from the clock are off by this much.
func (s *Store) ClockLead(ctx context.Context, now time.Time) (time.Duration, error) {
	var latest sql.NullString
	if err := s.db.QueryRowContext(ctx, `SELECT max(last_hlc) FROM chain`).Scan(&latest); err != nil {
		return 0, fmt.Errorf("read clock lead: %w", err)
	}
	if !latest.Valid {
		return 0, nil
	}
	ts, err := hlc.Parse(latest.String)
	if err != nil {
		return 0, err
	}
	return max(0, time.Duration(ts.Physical-now.UnixMilli())*time.Millisecond), nil
}

// ListParkedOnSite returns the rows parked on the site (ParkUnforwardable),
// oldest first.
func (s *Store) ListParkedOnSite(ctx context.Context) ([]Message, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+messageColumns+` FROM buffer WHERE parked_on_site = 1 ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("list rows parked on the site: %w", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("list rows parked on the site: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// RequeueParked makes a row parked on the site due for hand-off again at
// at, with note before its last error: an operator removed the cause.
// ErrNotFound when id is not parked on the site.
func (s *Store) RequeueParked(ctx context.Context, id string, at time.Time, note string) error {
	var n int64
	err := s.inTx(ctx, "requeue "+id, func(tx *writeTx) (err error) {
		n, err = tx.execCount(`UPDATE buffer SET parked_on_site = 0, handed_off = 0, next_attempt_at = ?,
			last_error = ? || last_error,
			status = coalesce((SELECT t.status FROM tracking t WHERE t.operation_id = buffer.tracked_operation_id), ?)
			WHERE message_id = ? AND parked_on_site = 1`, at.UnixNano(), note+"; before: ", string(contract.StatusPending), id)
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%s is not parked on this site: %w", id, ErrNotFound)
	}
	return nil
}

// ParkUnforwardable parks a row central refused for good: marked Parked and
// handed off, so the forwarder skips it and it stays, counted and readable,
// until an operator removes the cause and requeues it (RequeueParked).
func (s *Store) ParkUnforwardable(ctx context.Context, id string, at time.Time, reason string) error {
	return s.inTx(ctx, "park "+id, func(tx *writeTx) error {
		_, err := tx.exec(`UPDATE buffer SET status = ?, handed_off = 1, parked_on_site = 1, last_error = ?, last_attempt_at = ?
			WHERE message_id = ?`, string(contract.StatusParked), reason, at.UnixNano(), id)
		return err
	})
}
