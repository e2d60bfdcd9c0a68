package sitestore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-dev/outpost/contract"
)

// Replication. A site may run two nodes, active and standby. The active
// node's store records every statement a batch runs (writeTx.record); at
// commit the batch becomes one Change, numbered one past the last, with a
// rolling checksum: SHA-256 of the previous checksum and the change's
// bytes. The standby applies the changes in order to its own file
// (ApplyChanges): a change that does not follow on from its position, or
// whose checksum does not match, means its copy has left the active's
// stream, and it takes a full copy (Snapshot, Restore). Numbering and
// checksum are kept in the file (table replication), so they survive a
// restart and a CLI process writing the same file continues them.

// ErrStandby is returned for a write to a standby's store: only the active
// node takes operations.
var ErrStandby = errors.New("this node is the standby: its site store takes changes only from the active node")

// ErrResync is returned for changes that do not follow on from the store's
// position: the copy needs a full resync.
var ErrResync = errors.New("the changes do not follow on from this copy's position: a full resync is needed")

// Position is where a store stands in the replication stream: its last
// change and the rolling checksum through it.
type Position struct {
	Number   int64
	Checksum []byte
}

// Change is one committed batch of a replicating store.
type Change struct {
	Number int64
	// Prev is the checksum through Number-1; Checksum is SHA-256 of Prev and Data.
	Prev, Checksum []byte
	// Data are the batch's statements, encoded (encodeStatements).
	Data []byte
	// At is when the batch committed on the active node (just before its
	// commit reached the disk).
	At time.Time
}

func checksum(prev, data []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write(data)
	return h.Sum(nil)
}

// replication is the writer's part: whether to record, whether the file is
// a standby's copy, and the hooks that take each change.
type replication struct {
	enabled atomic.Bool
	standby atomic.Bool

	mu    sync.Mutex
	feed  Feed
	await func(number int64)
}

// Feed takes a replicating store's changes, in order. Add gets each change
// as its transaction commits, before the commit is on disk: the standby's
// write of a change overlaps the active node's own, which in sync mode is
// most of what a caller waits for. Withdraw gets a change whose commit then
// failed; a standby that took it has left the stream and resyncs.
type Feed interface {
	Add(Change)
	Withdraw(Change)
}

// committing hands c to the feed before its commit; withdraw after a
// failed one.
func (r *replication) committing(c Change) {
	if feed := r.currentFeed(); feed != nil {
		feed.Add(c)
	}
}

func (r *replication) withdraw(c Change) {
	if feed := r.currentFeed(); feed != nil {
		feed.Withdraw(c)
	}
}

func (r *replication) currentFeed() Feed {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.feed
}

func (r *replication) awaitFunc() func(int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.await
}

// numberChange turns the batch's recorded statements into the next change
// and moves the file's position to it, in the batch's transaction.
func numberChange(tx *writeTx) (*Change, error) {
	if !tx.recording || len(tx.recorded) == 0 {
		return nil, nil
	}
	data, err := encodeStatements(nil, tx.recorded)
	if err != nil {
		return nil, fmt.Errorf("record the batch for the standby: %w", err)
	}
	var pos Position
	if err := tx.queryRow(`SELECT change_number, checksum FROM replication`).Scan(&pos.Number, &pos.Checksum); err != nil {
		return nil, fmt.Errorf("read the replication position: %w", err)
	}
	c := Change{Number: pos.Number + 1, Prev: pos.Checksum, Checksum: checksum(pos.Checksum, data), Data: data, At: time.Now()}
	if err := setPosition(tx.ctx, tx.tx, Position{Number: c.Number, Checksum: c.Checksum}); err != nil {
		return nil, err
	}
	return &c, nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func setPosition(ctx context.Context, db execer, p Position) error {
	if _, err := db.ExecContext(ctx, `UPDATE replication SET change_number = ?, checksum = ?`, p.Number, p.Checksum); err != nil {
		return fmt.Errorf("save the replication position: %w", err)
	}
	return nil
}

// EnableReplication makes the store record every change from now on, and
// hands each, in order, to feed (nil: none). With await set (sync replication) a
// write's caller is answered once await(number) returned. The file
// remembers that it replicates, so another process writing it (the CLI)
// records its changes too.
func (s *Store) EnableReplication(ctx context.Context, feed Feed, await func(number int64)) error {
	err := s.writer.doOnStandby(ctx, func(tx *writeTx) error {
		_, err := tx.tx.ExecContext(tx.ctx, `UPDATE replication SET enabled = 1`)
		return err
	})
	if err != nil {
		return fmt.Errorf("enable replication: %w", err)
	}
	r := &s.writer.repl
	r.mu.Lock()
	r.feed, r.await = feed, await
	r.mu.Unlock()
	r.enabled.Store(true)
	return nil
}

// SetStandby makes the store refuse every write but applied changes
// (standby), or take writes again (active).
func (s *Store) SetStandby(standby bool) { s.writer.repl.standby.Store(standby) }

// Position is the store's place in the replication stream.
func (s *Store) Position(ctx context.Context) (Position, error) {
	var p Position
	if err := s.db.QueryRowContext(ctx, `SELECT change_number, checksum FROM replication`).Scan(&p.Number, &p.Checksum); err != nil {
		return Position{}, fmt.Errorf("read the replication position: %w", err)
	}
	return p, nil
}

// Epoch is the highest term this node has seen: a node that becomes active
// takes a higher one, and a node that learns of a higher one steps down.
// It is this node's own, never replicated.
func (s *Store) Epoch(ctx context.Context) (int64, error) {
	var e int64
	if err := s.db.QueryRowContext(ctx, `SELECT epoch FROM replication`).Scan(&e); err != nil {
		return 0, fmt.Errorf("read the epoch: %w", err)
	}
	return e, nil
}

// SetEpoch saves the node's epoch.
func (s *Store) SetEpoch(ctx context.Context, epoch int64) error {
	err := s.writer.doOnStandby(ctx, func(tx *writeTx) error {
		_, err := tx.tx.ExecContext(tx.ctx, `UPDATE replication SET epoch = ?`, epoch)
		return err
	})
	if err != nil {
		return fmt.Errorf("save epoch %d: %w", epoch, err)
	}
	return nil
}

// ApplyChanges applies changes received from the active node, in one
// transaction. Each must follow on from the store's position: the next
// number, and a checksum that chains from the store's. ErrResync otherwise,
// with nothing applied.
func (s *Store) ApplyChanges(ctx context.Context, changes []Change) error {
	if !s.writer.repl.standby.Load() {
		return errors.New("apply changes: this node is active; only a standby applies the active node's changes")
	}
	return s.writer.doOnStandby(ctx, func(tx *writeTx) error {
		var pos Position
		if err := tx.queryRow(`SELECT change_number, checksum FROM replication`).Scan(&pos.Number, &pos.Checksum); err != nil {
			return fmt.Errorf("read the replication position: %w", err)
		}
		for _, c := range changes {
			if c.Number != pos.Number+1 || !bytes.Equal(c.Prev, pos.Checksum) || !bytes.Equal(checksum(c.Prev, c.Data), c.Checksum) {
				return fmt.Errorf("change %d after position %d: %w", c.Number, pos.Number, ErrResync)
			}
			stmts, err := decodeStatements(c.Data)
			if err != nil {
				return fmt.Errorf("change %d: %w", c.Number, err)
			}
			for _, st := range stmts {
				if err := tx.execApplied(st.SQL, st.Args...); err != nil {
					return fmt.Errorf("change %d: %.80q: %w", c.Number, st.SQL, err)
				}
			}
			pos = Position{Number: c.Number, Checksum: c.Checksum}
		}
		return setPosition(tx.ctx, tx.tx, pos)
	})
}

// copiedTables are the tables a full resync copies: every table but
// replication (each node's own position and epoch). meta is copied but for
// store_id, which names this node's file. TestResyncCopiesEveryTable
// fails when a migration adds a table this list lacks.
var copiedTables = []string{"buffer", "chain", "tracking", "tracking_changes", "job_log", "idempotency_keys", "airgap_transfers"}

// Snapshot writes a consistent copy of the file to path (which must not
// exist) and returns the position it holds. It runs between batches.
func (s *Store) Snapshot(ctx context.Context, path string) (Position, error) {
	var pos Position
	err := s.writer.exclusive(ctx, func(conn *sql.Conn) error {
		if err := conn.QueryRowContext(ctx, `SELECT change_number, checksum FROM replication`).Scan(&pos.Number, &pos.Checksum); err != nil {
			return fmt.Errorf("read the replication position: %w", err)
		}
		if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
			return fmt.Errorf("write snapshot %s: %w", path, err)
		}
		return nil
	})
	return pos, err
}

// Restore replaces the store's rows with those of the snapshot at path (a
// file Snapshot wrote) and returns the position it now holds. It runs
// between batches, in one transaction.
func (s *Store) Restore(ctx context.Context, path string) (Position, error) {
	var pos Position
	err := s.writer.exclusive(ctx, func(conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, `ATTACH DATABASE ? AS snap`, path); err != nil {
			return fmt.Errorf("open snapshot %s: %w", path, err)
		}
		defer conn.ExecContext(context.Background(), `DETACH DATABASE snap`)
		var theirs, ours int
		if err := conn.QueryRowContext(ctx, `PRAGMA snap.user_version`).Scan(&theirs); err != nil {
			return fmt.Errorf("snapshot %s: %w", path, err)
		}
		if err := conn.QueryRowContext(ctx, `PRAGMA main.user_version`).Scan(&ours); err != nil {
			return err
		}
		if theirs != ours {
			return fmt.Errorf("snapshot %s is schema version %d, this store %d: run the same Outpost version on both nodes", path, theirs, ours)
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, table := range copiedTables {
			if _, err := tx.ExecContext(ctx, `DELETE FROM main.`+table); err != nil {
				return fmt.Errorf("restore %s: %w", table, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO main.`+table+` SELECT * FROM snap.`+table); err != nil {
				return fmt.Errorf("restore %s: %w", table, err)
			}
		}
		for _, q := range []string{`DELETE FROM main.meta WHERE name != 'store_id'`,
			`INSERT INTO main.meta SELECT * FROM snap.meta WHERE name != 'store_id'`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("restore meta: %w", err)
			}
		}
		if err := tx.QueryRowContext(ctx, `SELECT change_number, checksum FROM snap.replication`).Scan(&pos.Number, &pos.Checksum); err != nil {
			return fmt.Errorf("snapshot position: %w", err)
		}
		if err := setPosition(ctx, tx, pos); err != nil {
			return err
		}
		return tx.Commit()
	})
	return pos, err
}

// Handover is what a node whose copy is about to be replaced gives the
// active node: every operation its store holds, with every node's job-log
// entries, so the active adopts what it never received (asynchronous
// replication had not sent it yet) and nothing accepted is lost.
type Handover struct {
	Entries    []Entry                     `json:"entries"` // every node's job log, in chain order
	Messages   []Message                   `json:"messages"`
	HandedOff  []string                    `json:"handedOff"` // messages whose hand-off central acknowledged
	Operations []contract.TrackedOperation `json:"operations"`
	Keys       []IdempotencyKey            `json:"keys"`
}

// IdempotencyKey is a remembered idempotency key.
type IdempotencyKey struct {
	OperationID string    `json:"operationId"`
	RequestHash []byte    `json:"requestHash"`
	CreatedAt   time.Time `json:"createdAt"`
}

// HandoverSet reads every job-log entry, buffer row, tracking row and
// idempotency key.
func (s *Store) HandoverSet(ctx context.Context) (Handover, error) {
	var h Handover
	nodes, err := s.Nodes(ctx)
	if err != nil {
		return h, fmt.Errorf("read the job log to hand over: %w", err)
	}
	for _, node := range nodes {
		entries, err := s.jobLogEntries(ctx, node)
		if err != nil {
			return h, fmt.Errorf("read the job log to hand over: %w", err)
		}
		h.Entries = append(h.Entries, entries...)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+messageColumns+`, handed_off FROM buffer ORDER BY hlc`)
	if err != nil {
		return h, fmt.Errorf("read the buffer to hand over: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var handedOff bool
		m, err := scanMessage(scanWithExtra{rows, &handedOff})
		if err != nil {
			return h, fmt.Errorf("read the buffer to hand over: %w", err)
		}
		h.Messages = append(h.Messages, m)
		if handedOff {
			h.HandedOff = append(h.HandedOff, m.ID)
		}
	}
	if err := rows.Err(); err != nil {
		return h, fmt.Errorf("read the buffer to hand over: %w", err)
	}
	if h.Operations, err = s.queryRows(ctx, `SELECT `+trackingColumns+` FROM tracking ORDER BY seq`); err != nil {
		return h, fmt.Errorf("read tracking rows to hand over: %w", err)
	}
	keys, err := s.db.QueryContext(ctx, `SELECT operation_id, request_hash, created_at FROM idempotency_keys`)
	if err != nil {
		return h, fmt.Errorf("read idempotency keys to hand over: %w", err)
	}
	defer keys.Close()
	for keys.Next() {
		var k IdempotencyKey
		var at int64
		if err := keys.Scan(&k.OperationID, &k.RequestHash, &at); err != nil {
			return h, err
		}
		k.CreatedAt = time.Unix(0, at).UTC()
		h.Keys = append(h.Keys, k)
	}
	return h, keys.Err()
}

// scanWithExtra scans a row's leading columns with scanMessage's targets
// and its last column into extra.
type scanWithExtra struct {
	rows  *sql.Rows
	extra any
}

func (s scanWithExtra) Scan(dest ...any) error { return s.rows.Scan(append(dest, s.extra)...) }

// Adopt adds the operations of h this store never received, and returns
// how many. Each operation was accepted by one node and stamped on that
// node's chain, and replication applies changes in order, so this store
// received exactly the entries of each node's chain up to its own copy of
// that chain's head: an entry after the head is new here. Only those are
// adopted, with their buffer row, tracking row and idempotency key, and
// the entries extend the chain when they link on from its head. An
// operation received and since delivered and deleted here is not adopted
// again, however old the copy handing it over.
func (s *Store) Adopt(ctx context.Context, h Handover) (int, error) {
	handedOff := make(map[string]bool, len(h.HandedOff))
	for _, id := range h.HandedOff {
		handedOff[id] = true
	}
	var fresh map[string]bool
	err := s.inTx(ctx, "adopt handed-over operations", func(tx *writeTx) (err error) {
		if fresh, err = adoptEntries(tx, h.Entries); err != nil {
			return err
		}
		for _, k := range h.Keys {
			if !fresh[k.OperationID] {
				continue
			}
			if _, err := tx.exec(`INSERT INTO idempotency_keys (operation_id, request_hash, created_at) VALUES (?, ?, ?)
				ON CONFLICT DO NOTHING`, k.OperationID, k.RequestHash, k.CreatedAt.UnixNano()); err != nil {
				return fmt.Errorf("adopt idempotency key %s: %w", k.OperationID, err)
			}
		}
		for _, op := range h.Operations {
			if fresh[op.OperationID] {
				if err := adoptOperation(tx, op); err != nil {
					return err
				}
			}
		}
		for _, m := range h.Messages {
			if fresh[m.ID] {
				if err := adoptMessage(tx, m, handedOff[m.ID]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.signalChanged()
	return len(fresh), nil
}

// adoptEntries finds the entries past this store's head of their node's
// chain, appends those that link on from it, and returns their job ids.
func adoptEntries(tx *writeTx, entries []Entry) (map[string]bool, error) {
	fresh := map[string]bool{}
	for _, e := range entries {
		head, err := loadHead(tx, e.Node)
		if err != nil {
			return nil, err
		}
		if !head.last.Before(e.HLC) {
			continue // received here already
		}
		fresh[e.JobID] = true
		if !bytes.Equal(orEmpty(e.PrevLink), head.link) {
			continue // a gap (pruned before it was sent): the operation is adopted, the chain cannot take it
		}
		m := Message{NewMessage: NewMessage{ID: e.JobID, Category: e.Kind, Payload: e.Payload, Provenance: Provenance{Node: e.Node}},
			CreatedAt: e.EnqueuedAt, HLC: e.HLC, PayloadHash: e.PayloadHash, PrevLink: head.link, Link: e.Link}
		if err := insertJobLogEntry(tx, m); err != nil {
			return nil, err
		}
		if e.Acked {
			if _, err := tx.exec(ackOnlineSQL, sql.Named("id", e.JobID), sql.Named("now", e.EnqueuedAt.UnixNano())); err != nil {
				return nil, fmt.Errorf("adopt job %s: %w", e.JobID, err)
			}
		}
		tx.heads[e.Node] = chainHead{last: e.HLC, link: e.Link}
	}
	return fresh, nil
}

// adoptMessage adds m's buffer row when this store lacks it.
func adoptMessage(tx *writeTx, m Message, handedOff bool) error {
	_, err := tx.exec(`INSERT INTO buffer (`+messageColumns+`, handed_off)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		m.ID, m.Category, m.TrackedOperationID, m.Target, m.Payload, string(m.Status), m.RetryCount,
		m.LastError, m.CreatedAt.UnixNano(), nanosPtr(m.LastAttemptAt), m.NextAttemptAt.UnixNano(),
		m.Provenance.SiteID, m.Provenance.Node, m.Provenance.Instance, m.Provenance.Script, m.HLC.String(),
		m.PayloadHash, orEmpty(m.PrevLink), m.Link, m.TraceParent, handedOff)
	if err != nil {
		return fmt.Errorf("adopt %s %s: %w", m.Category, m.ID, err)
	}
	return nil
}

// orEmpty is b, or an empty blob for nil: a chain's first entry has an
// empty prev_link, which scans (and travels as JSON) as nil.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// adoptOperation adds op's tracking row when this store lacks it, under a
// change number of this store, so telemetry reports it.
func adoptOperation(tx *writeTx, op contract.TrackedOperation) error {
	var exists bool
	if err := tx.queryRow(`SELECT EXISTS (SELECT 1 FROM tracking WHERE operation_id = ?)`, op.OperationID).Scan(&exists); err != nil {
		return fmt.Errorf("adopt operation %s: %w", op.OperationID, err)
	}
	if exists {
		return nil
	}
	seq, err := nextSeq(tx)
	if err != nil {
		return err
	}
	op.Seq = seq
	return insertTracking(tx, op)
}
