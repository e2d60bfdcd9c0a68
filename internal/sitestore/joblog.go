package sitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/hlc"
)

// The job log is every operation this site file accepted, per node, in HLC
// order, each entry linked to the one before: what an air-gap bundle
// carries. It lives apart from the buffer, whose rows go on hand-off, so
// the chain survives them. An entry is acknowledged when central has its
// operation (online hand-off, or an air-gap receipt) and is pruned only
// then, from the front of its node's chain, the last pruned link kept as
// the node's checkpoint so what remains still verifies.

// ErrIdempotencyConflict refuses an idempotency key already used for a
// different request.
var ErrIdempotencyConflict = errors.New("idempotency key already used for a different request")

// ErrReplayed answers a request whose idempotency key already began the
// same operation: nothing new was written.
var ErrReplayed = errors.New("this request was already accepted under its idempotency key")

// Acknowledgement states of a job-log entry.
const (
	ackNone    = 0
	ackOnline  = 1 // central acknowledged the online hand-off
	ackReceipt = 2 // an air-gap receipt named it
)

// ackOnlineSQL acknowledges the entry of a handed-off operation (run by
// inOneTx with :id and :now).
const ackOnlineSQL = `UPDATE job_log SET acked = 1, acked_at = :now WHERE job_id = :id AND acked = 0`

// insertJobLogSQL inserts one job-log entry; insertJobLogRowSQL is the
// entry's values, which a multi-row insert repeats (appendChunk).
const (
	insertJobLogSQL = `INSERT INTO job_log (node, job_id, kind, hlc, payload, payload_hash, prev_link, link, enqueued_at)
	VALUES ` + insertJobLogRowSQL
	insertJobLogRowSQL = `(?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// insertJobLogEntry appends m, as stamped for the buffer, to its node's log.
func insertJobLogEntry(tx *writeTx, m Message) error {
	_, err := tx.execPrepared(tx.stmts.insertJobLog, insertJobLogSQL, appendJobLogArgs(nil, m, m.HLC.String())...)
	if err != nil {
		return fmt.Errorf("append %s %s to the job log: %w", m.Category, m.ID, err)
	}
	return nil
}

// jobLogColumns is how many values a job-log entry has in insertJobLogSQL.
var jobLogColumns = strings.Count(insertJobLogRowSQL, "?")

// appendJobLogArgs appends the values of m's job-log entry, whose HLC
// timestamp as text is ts, to args.
func appendJobLogArgs(args []any, m Message, ts string) []any {
	return append(args, m.Provenance.Node, m.ID, m.Category, ts, m.Payload, m.PayloadHash, m.PrevLink, m.Link, m.CreatedAt.UnixNano())
}

// claimKey records m's idempotency key (its id) with its request hash. It
// reports replayed when the key was accepted before with the same request,
// and ErrIdempotencyConflict when with another one.
func claimKey(tx *writeTx, m NewMessage, now time.Time) (replayed bool, err error) {
	if m.RequestHash == nil {
		return false, nil
	}
	var stored []byte
	err = tx.queryRow(`SELECT request_hash FROM idempotency_keys WHERE operation_id = ?`, m.ID).Scan(&stored)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.exec(`INSERT INTO idempotency_keys (operation_id, request_hash, created_at) VALUES (?, ?, ?)`,
			m.ID, m.RequestHash, now.UnixNano())
		if err != nil {
			return false, fmt.Errorf("record idempotency key of %s: %w", m.ID, err)
		}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read idempotency key of %s: %w", m.ID, err)
	case !bytes.Equal(stored, m.RequestHash):
		return false, fmt.Errorf("operation %s: %w", m.ID, ErrIdempotencyConflict)
	}
	return true, nil
}

// Entry is one job-log entry.
type Entry struct {
	Node        string
	JobID       string
	Kind        string
	HLC         hlc.Timestamp
	Payload     []byte
	PayloadHash []byte
	PrevLink    []byte
	Link        []byte
	EnqueuedAt  time.Time
	// Acked says central has the operation (online or by a receipt).
	Acked bool
}

// JobLog is a node's log from its checkpoint on.
type JobLog struct {
	Node string
	// CheckpointLink and CheckpointHLC are the link and time of the entry
	// before Entries[0]: empty when the log starts at the node's first entry.
	CheckpointLink []byte
	CheckpointHLC  string
	Entries        []Entry
	// Head is the node's chain head: the last entry's link.
	Head []byte
}

// HeadHLC is the time of the log's head: its last entry's, or its
// checkpoint's when it has none. Not the node's clock, which an air-gap
// receipt moves past the head (ReceiveClock).
func (l JobLog) HeadHLC() string {
	if n := len(l.Entries); n > 0 {
		return l.Entries[n-1].HLC.String()
	}
	return l.CheckpointHLC
}

// Nodes lists the nodes with a chain in this file.
func (s *Store) Nodes(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT node FROM chain ORDER BY node`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var nodes []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		nodes = append(nodes, n)
	}
	return nodes, rows.Err()
}

// ReadJobLog returns node's log from its checkpoint, or, when after is set,
// from the first entry after that HLC (the checkpoint is then the entry
// before it). Acknowledged entries not yet pruned are in it: they sit
// between unacknowledged ones, and the chain verifies only whole.
func (s *Store) ReadJobLog(ctx context.Context, node string, after *hlc.Timestamp) (JobLog, error) {
	log := JobLog{Node: node}
	err := s.db.QueryRowContext(ctx, `SELECT head, checkpoint_link, checkpoint_hlc FROM chain WHERE node = ?`, node).
		Scan(&log.Head, &log.CheckpointLink, &log.CheckpointHLC)
	if errors.Is(err, sql.ErrNoRows) {
		return JobLog{}, fmt.Errorf("node %q has no job log in this site file", node)
	}
	if err != nil {
		return JobLog{}, fmt.Errorf("read chain of node %s: %w", node, err)
	}
	if log.Entries, err = s.jobLogEntries(ctx, node); err != nil {
		return JobLog{}, err
	}
	if after != nil {
		log.trimThrough(*after)
	}
	return log, nil
}

// trimThrough drops the entries at or before t, moving the checkpoint to
// the last one dropped.
func (l *JobLog) trimThrough(t hlc.Timestamp) {
	i := 0
	for i < len(l.Entries) && !t.Before(l.Entries[i].HLC) {
		i++
	}
	if i > 0 {
		l.CheckpointLink, l.CheckpointHLC = l.Entries[i-1].Link, l.Entries[i-1].HLC.String()
		l.Entries = l.Entries[i:]
	}
}

func (s *Store) jobLogEntries(ctx context.Context, node string) ([]Entry, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT job_id, kind, hlc, payload, payload_hash, prev_link, link, enqueued_at, acked
		FROM job_log WHERE node = ? ORDER BY seq`, node)
	if err != nil {
		return nil, fmt.Errorf("read job log of node %s: %w", node, err)
	}
	defer rows.Close()
	var entries []Entry
	for rows.Next() {
		e := Entry{Node: node}
		var ts string
		var enqueued int64
		var acked int
		if err := rows.Scan(&e.JobID, &e.Kind, &ts, &e.Payload, &e.PayloadHash, &e.PrevLink, &e.Link, &enqueued, &acked); err != nil {
			return nil, fmt.Errorf("read job log of node %s: %w", node, err)
		}
		if e.HLC, err = hlc.Parse(ts); err != nil {
			return nil, fmt.Errorf("job log of node %s, job %s: %w", node, e.JobID, err)
		}
		e.EnqueuedAt, e.Acked = time.Unix(0, enqueued).UTC(), acked != ackNone
		entries = append(entries, e)
	}
	return entries, rows.Err()
}

// Settled is an operation an air-gap receipt says central has.
type Settled struct {
	ID     string
	Kind   string
	Status contract.Status // central's state when it imported the operation
	// RetryCount, LastAttemptAt and DeliveredAt are central's record of it
	// then, when central had it before the import.
	RetryCount    int
	LastAttemptAt *time.Time
	DeliveredAt   *time.Time
}

// SettleByReceipt acknowledges what a receipt names: each entry records
// central's state, a notification's buffer row goes (central owns it
// now, so the forwarder never sends it again) and a cached call's row is
// marked handed off unless the site is still retrying it (central only
// mirrors an imported call; the site keeps driving one it has not settled).
// It returns how many operations it settled. at is now; receiptAt the
// receipt's time, which orders the states receipts carry.
func (s *Store) SettleByReceipt(ctx context.Context, at, receiptAt time.Time, ops []Settled) (int, error) {
	var settled int
	err := s.inTx(ctx, "settle by receipt", func(tx *writeTx) error {
		settled = 0
		for _, op := range ops {
			n, err := settleOne(tx, op, at, receiptAt)
			if err != nil {
				return err
			}
			settled += n
		}
		return nil
	})
	return settled, err
}

// settleOne settles op at at and records central's state of it unless a
// newer receipt than receiptAt's recorded one: a receipt from a later
// import knows more (an operation delivered since), and one acked late
// knows less.
func settleOne(tx *writeTx, op Settled, at, receiptAt time.Time) (int, error) {
	n, err := tx.execCount(`UPDATE job_log SET acked = ?, acked_at = ? WHERE job_id = ? AND acked != ?`,
		ackReceipt, at.UnixNano(), op.ID, ackReceipt)
	if err == nil {
		_, err = tx.exec(`UPDATE job_log SET central_status = ?, central_retry_count = ?, central_last_attempt_at = ?,
			central_delivered_at = ?, central_at = ? WHERE job_id = ? AND (central_at IS NULL OR central_at <= ?)`,
			string(op.Status), op.RetryCount, nanosPtr(op.LastAttemptAt), nanosPtr(op.DeliveredAt), receiptAt.UnixNano(),
			op.ID, receiptAt.UnixNano())
	}
	if err != nil {
		return 0, fmt.Errorf("settle %s: %w", op.ID, err)
	}
	if op.Kind == contract.KindNotification {
		_, err = tx.exec(`DELETE FROM buffer WHERE message_id = ?`, op.ID)
	}
	if err != nil {
		return 0, fmt.Errorf("settle %s: remove its buffer row: %w", op.ID, err)
	}
	return int(n), nil
}

// ExportState is what the job log says of an operation the buffer no
// longer holds, or holds as exported.
type ExportState struct {
	ExportedAt *time.Time
	// CentralStatus is what the newest air-gap receipt said central had;
	// empty until one did. CentralRetryCount, CentralLastAttemptAt and
	// CentralDeliveredAt are the rest of central's record it carried.
	CentralStatus        contract.Status
	CentralRetryCount    int
	CentralLastAttemptAt *time.Time
	CentralDeliveredAt   *time.Time
}

// JobExportState reads id's export and receipt state; ErrNotFound when the
// job log has no entry for it.
func (s *Store) JobExportState(ctx context.Context, id string) (ExportState, error) {
	var exported, lastAttempt, delivered sql.NullInt64
	var st ExportState
	err := s.db.QueryRowContext(ctx, `SELECT exported_at, central_status, central_retry_count, central_last_attempt_at, central_delivered_at
		FROM job_log WHERE job_id = ? ORDER BY seq DESC LIMIT 1`, id).
		Scan(&exported, &st.CentralStatus, &st.CentralRetryCount, &lastAttempt, &delivered)
	if errors.Is(err, sql.ErrNoRows) {
		return ExportState{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return ExportState{}, fmt.Errorf("read export state of %s: %w", id, err)
	}
	st.ExportedAt, st.CentralLastAttemptAt, st.CentralDeliveredAt = timeOf(exported), timeOf(lastAttempt), timeOf(delivered)
	return st, nil
}

// PruneJobLog deletes, per node, the acknowledged entries at the front of
// its chain: handed off online at any age, settled by a receipt before
// receiptCutoff (the site's status answers from them until then). The last
// pruned entry becomes the node's checkpoint. It returns how many it pruned.
func (s *Store) PruneJobLog(ctx context.Context, receiptCutoff time.Time) (int, error) {
	nodes, err := s.Nodes(ctx)
	if err != nil {
		return 0, err
	}
	var pruned int64
	for _, node := range nodes {
		err := s.inTx(ctx, "prune job log of node "+node, func(tx *writeTx) error {
			n, err := pruneNode(tx, node, receiptCutoff)
			pruned += n
			return err
		})
		if err != nil {
			return int(pruned), err
		}
	}
	return int(pruned), nil
}

// pruneNode prunes one node's acknowledged prefix in tx.
func pruneNode(tx *writeTx, node string, receiptCutoff time.Time) (int64, error) {
	var last sql.NullInt64
	err := tx.queryRow(`SELECT max(seq) FROM job_log WHERE node = ? AND seq < coalesce(
		(SELECT min(seq) FROM job_log WHERE node = ? AND NOT (acked = 1 OR (acked = 2 AND acked_at < ?))), 9223372036854775807)`,
		node, node, receiptCutoff.UnixNano()).Scan(&last)
	if err != nil || !last.Valid {
		return 0, err
	}
	_, err = tx.exec(`UPDATE chain SET (checkpoint_link, checkpoint_hlc) =
		(SELECT link, hlc FROM job_log WHERE seq = ?) WHERE node = ?`, last.Int64, node)
	if err != nil {
		return 0, fmt.Errorf("move checkpoint of node %s: %w", node, err)
	}
	n, err := tx.execCount(`DELETE FROM job_log WHERE node = ? AND seq <= ?`, node, last.Int64)
	if err != nil {
		return 0, fmt.Errorf("prune job log of node %s: %w", node, err)
	}
	return n, nil
}

// PruneIdempotencyKeys forgets keys recorded before cutoff whose operation
// has left the site (no buffer, tracking or job-log row): a script retrying
// later than the site's retention makes a new operation. A key stays while
// its operation is still here, however old (weeks, on a site without a
// link): its id would collide with the operation's rows, and a new request
// under it would put two payloads for one job in the next bundle, which
// central refuses as a conflict.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, cutoff time.Time) (int, error) {
	var n int64
	err := s.inTx(ctx, "prune idempotency keys", func(tx *writeTx) (err error) {
		n, err = tx.execCount(`DELETE FROM idempotency_keys WHERE created_at < ?
			AND NOT EXISTS (SELECT 1 FROM buffer WHERE message_id = idempotency_keys.operation_id)
			AND NOT EXISTS (SELECT 1 FROM tracking WHERE tracking.operation_id = idempotency_keys.operation_id)
			AND NOT EXISTS (SELECT 1 FROM job_log WHERE job_id = idempotency_keys.operation_id)`, cutoff.UnixNano())
		return err
	})
	return int(n), err
}

// ReceiveClock merges a remote HLC timestamp (from an air-gap receipt) into
// node's clock, so the node's next timestamps order after it; a remote
// more than maxOffset ahead of the wall clock is refused (hlc.ErrTooFarAhead).
func (s *Store) ReceiveClock(ctx context.Context, node string, remote hlc.Timestamp, maxOffset time.Duration) error {
	return s.inTx(ctx, "receive clock of node "+node, func(tx *writeTx) error {
		head, err := loadHead(tx, node)
		if err != nil {
			return err
		}
		if head.last, err = hlc.Receive(head.last, remote, s.now().UnixMilli(), maxOffset); err != nil {
			return err
		}
		tx.heads[node] = head
		return nil
	})
}
