package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/dbtx"
	"github.com/outpost-dev/outpost/internal/hlc"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/site"
)

// Names and provenance of everything the benchmark buffers and sends.
const (
	benchSite = "bench"
	// bareSite is the site search attribute of the bare workflows started
	// like a notification: no site's.
	bareSite     = "bench-bare"
	benchNode    = "node-a"
	benchList    = "bench"
	benchScript  = "outpost-bench"
	benchSubject = "Pump 3 tripped"
	benchSystem  = "erp"
	benchMethod  = "createOrder"
)

// siteOptions is the SDK's provenance for the benchmark's notifications.
func siteOptions() site.Options {
	return site.Options{SiteID: benchSite, Node: benchNode, Script: benchScript}
}

// createStore makes a site store file with the site's schema and indexes
// (the SDK creates them) and closes it.
func createStore(ctx context.Context, path string) error {
	c, err := site.Open(ctx, path, siteOptions())
	if err != nil {
		return err
	}
	return c.Close()
}

// openRaw creates a site store file and opens it the way the site does
// (sqlitedb: WAL, synchronous=FULL) for the raw SQL of baselines and prefill.
func openRaw(ctx context.Context, path string) (*sql.DB, error) {
	if err := createStore(ctx, path); err != nil {
		return nil, err
	}
	return sqlitedb.Open(ctx, path)
}

// bufferRow is one row of the site's buffer table, as the SDK writes it.
type bufferRow struct {
	ID                 string
	Category           string
	TrackedOperationID string
	Target             string
	Payload            []byte
	CreatedAt          int64 // Unix nanoseconds
	HLC                string
	PayloadHash        []byte
	PrevLink           []byte
	Link               []byte
}

// rowMaker makes buffer rows of one node: notifications with fresh ids and
// cached calls, each stamped with its HLC timestamp and chain link.
type rowMaker struct {
	body string
	last hlc.Timestamp
	link []byte
}

func newRowMaker(body string) *rowMaker { return &rowMaker{body: body, link: []byte{}} }

// notification is a notification as Notify buffers it.
func (m *rowMaker) notification(now time.Time) (bufferRow, error) {
	id, err := site.NewID()
	if err != nil {
		return bufferRow{}, err
	}
	payload, err := json.Marshal(submission(id, m.body, now))
	if err != nil {
		return bufferRow{}, fmt.Errorf("encode notification: %w", err)
	}
	return m.stamp(bufferRow{ID: id, Category: contract.KindNotification, Target: benchList, Payload: payload}, now), nil
}

// submission is what the site hands to central for notification id.
func submission(id, body string, now time.Time) contract.NotificationSubmission {
	return contract.NotificationSubmission{
		NotificationID: id, ListName: benchList, Subject: benchSubject, Body: body,
		SourceSiteID: benchSite, SourceNode: benchNode, SourceScript: benchScript, SiteEnqueuedAt: now.UTC(),
	}
}

// call is cached call id's buffer row (its payload carries the body) as
// BeginOperation writes it.
func (m *rowMaker) call(id string, now time.Time) (bufferRow, error) {
	payload, err := targets.Encode(targets.Request{
		Kind: contract.KindExternalCall, System: benchSystem, Method: benchMethod, Params: map[string]any{"note": m.body},
	})
	if err != nil {
		return bufferRow{}, err
	}
	return m.stamp(bufferRow{
		ID: id, Category: contract.KindExternalCall, TrackedOperationID: id,
		Target: benchSystem + "." + benchMethod, Payload: payload,
	}, now), nil
}

func (m *rowMaker) stamp(row bufferRow, now time.Time) bufferRow {
	ts := hlc.Next(m.last, now.UnixMilli())
	row.CreatedAt, row.HLC = now.UnixNano(), ts.String()
	row.PayloadHash = hlc.PayloadHash(row.Payload)
	row.PrevLink, row.Link = m.link, hlc.Link(m.link, row.ID, ts, row.PayloadHash)
	m.last, m.link = ts, row.Link
	return row
}

// callEpoch is the time of callID(0): the prefilled calls' ids are version 7
// UUIDs of callEpoch plus i milliseconds, in the order of i like the ids
// the SDK makes (site.NewID), so the prefill appends to the primary keys
// instead of writing all over them.
var callEpoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// callID is the id of the i-th prefilled cached call: derived from i, so
// the status sections pick random existing ids without keeping a list.
func callID(i int) string {
	id := uuid.NewSHA1(uuid.NameSpaceOID, []byte("outpost-bench-call-"+strconv.Itoa(i)))
	ms := uint64(callEpoch) + uint64(i)
	for b := range 6 {
		id[b] = byte(ms >> (40 - 8*b))
	}
	id[6] = 0x70 | id[6]&0x0f // version 7; SHA-1 already set the variant
	return id.String()
}

const insertBufferSQL = `INSERT INTO buffer (message_id, category, tracked_operation_id, target, payload,
	status, created_at, next_attempt_at, site_id, node, script, hlc, payload_hash, prev_link, link)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

const insertJobLogSQL = `INSERT INTO job_log (node, job_id, kind, hlc, payload, payload_hash, prev_link, link, enqueued_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertRows commits rows in one transaction, each as its buffer row and
// its job-log entry: the two rows the SDK writes for every operation.
func insertRows(ctx context.Context, db *sql.DB, rows []bufferRow) error {
	return dbtx.Run(ctx, db, func(tx *sql.Tx) error {
		if err := insertBuffer(ctx, tx, rows); err != nil {
			return err
		}
		return insertJobLog(ctx, tx, rows)
	})
}

func insertJobLog(ctx context.Context, tx *sql.Tx, rows []bufferRow) error {
	stmt, err := tx.PrepareContext(ctx, insertJobLogSQL)
	if err != nil {
		return fmt.Errorf("prepare job log insert: %w", err)
	}
	defer stmt.Close()
	for _, r := range rows {
		_, err := stmt.ExecContext(ctx, benchNode, r.ID, r.Category, r.HLC, r.Payload, r.PayloadHash, r.PrevLink, r.Link, r.CreatedAt)
		if err != nil {
			return fmt.Errorf("insert job log entry %s: %w", r.ID, err)
		}
	}
	return nil
}

func insertBuffer(ctx context.Context, tx *sql.Tx, rows []bufferRow) error {
	stmt, err := tx.PrepareContext(ctx, insertBufferSQL)
	if err != nil {
		return fmt.Errorf("prepare buffer insert: %w", err)
	}
	defer stmt.Close()
	for _, r := range rows {
		_, err := stmt.ExecContext(ctx, r.ID, r.Category, r.TrackedOperationID, r.Target, r.Payload,
			string(contract.StatusPending), r.CreatedAt, r.CreatedAt, benchSite, benchNode, benchScript,
			r.HLC, r.PayloadHash, r.PrevLink, r.Link)
		if err != nil {
			return fmt.Errorf("insert buffer row %s: %w", r.ID, err)
		}
	}
	return nil
}

// insertTracking writes the Pending tracking rows of calls, with change
// numbers from seq+1 on.
func insertTracking(ctx context.Context, tx *sql.Tx, calls []bufferRow, seq int64) error {
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO tracking (operation_id, kind, target, status, site_id,
		node, script, created_at, updated_at, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("prepare tracking insert: %w", err)
	}
	defer stmt.Close()
	for i, c := range calls {
		_, err := stmt.ExecContext(ctx, c.ID, contract.KindExternalCall, c.Target, string(contract.StatusPending),
			benchSite, benchNode, benchScript, c.CreatedAt, c.CreatedAt, seq+int64(i)+1)
		if err != nil {
			return fmt.Errorf("insert tracking row %s: %w", c.ID, err)
		}
	}
	return nil
}

// prefillChunk is how many rows one prefill transaction writes.
const prefillChunk = 50000

// prefill writes notifications and calls (cached calls waiting for their
// hand-off: a tracking row and a buffer row each) straight into a fresh site
// store at path, in large transactions: a site after a long outage, made in
// seconds rather than hours. The rows are the SDK's (payloads, HLC
// timestamps, hash chain), so the daemon forwards them as its own. Calls
// are spread evenly among the notifications and have the ids callID(0…).
// The file is written as fast as SQLite writes it: without a journal or
// a sync, the secondary indexes dropped and built again
// over the full tables (a sorted build instead of an insert at a random
// place per row); then it is in WAL mode with the site's exact schema,
// and synced once.
//
// The one sync is what a site's store, written a commit at a time with
// synchronous=FULL, would be: on disk. Without it the kernel writes the
// prefill's gigabytes back while the sections time their runs on the
// file, and each fsync of those runs waits behind that writeback.
func prefill(ctx context.Context, path, body string, notifications, calls int) error {
	db, err := openRaw(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := bulkLoad(ctx, db, func() error { return fillRows(ctx, db, body, notifications, calls) }); err != nil {
		return fmt.Errorf("prefill %s: %w", path, err)
	}
	return syncFile(path)
}

// syncFile makes what is written to the file at path durable.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open %s to sync it: %w", path, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// bulkLoad runs load on db's one connection with no journal, no syncs and
// the secondary indexes of the buffer and tracking tables dropped, then
// builds the indexes again and puts the file back in WAL mode. Nothing is
// synced: a crash fails the run, whose files nobody needs after it, and a
// failed load leaves the file unusable for the same reason.
func bulkLoad(ctx context.Context, db *sql.DB, load func() error) error {
	// One connection, so the pragmas hold for every statement; a big page
	// cache keeps the inserts and the index builds from rereading B-trees.
	db.SetMaxOpenConns(1)
	if err := execAll(ctx, db, `PRAGMA cache_size = -262144`, `PRAGMA journal_mode = OFF`, `PRAGMA synchronous = OFF`); err != nil {
		return err
	}
	indexes, err := secondaryIndexes(ctx, db)
	if err != nil {
		return err
	}
	for _, ix := range indexes {
		if err := execAll(ctx, db, `DROP INDEX `+ix.name); err != nil {
			return err
		}
	}
	if err := load(); err != nil {
		return err
	}
	for _, ix := range indexes {
		if err := execAll(ctx, db, ix.sql); err != nil {
			return err
		}
	}
	// The journal mode is the file's, the sync setting the connection's:
	// the site's connections set their own.
	return execAll(ctx, db, `PRAGMA journal_mode = WAL`)
}

// index is a secondary index: its name and the statement that makes it.
type index struct{ name, sql string }

// secondaryIndexes are the indexes of the buffer and tracking tables that
// can be dropped (a primary key's cannot, and has no statement).
func secondaryIndexes(ctx context.Context, db *sql.DB) ([]index, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, sql FROM sqlite_master
		WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN ('buffer', 'tracking') ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list the indexes to drop: %w", err)
	}
	defer rows.Close()
	var out []index
	for rows.Next() {
		var ix index
		if err := rows.Scan(&ix.name, &ix.sql); err != nil {
			return nil, fmt.Errorf("list the indexes to drop: %w", err)
		}
		out = append(out, ix)
	}
	return out, rows.Err()
}

func execAll(ctx context.Context, db *sql.DB, statements ...string) error {
	for _, q := range statements {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// fillRows writes the rows in transactions of prefillChunk, each built
// while the one before it is written, then the chain head and the change
// counter.
func fillRows(ctx context.Context, db *sql.DB, body string, notifications, calls int) error {
	p := &prefiller{maker: newRowMaker(body), total: notifications + calls, calls: calls}
	g, gctx := errgroup.WithContext(ctx)
	built := make(chan prefillChunkRows, 1)
	g.Go(func() error {
		defer close(built)
		for p.done < p.total {
			c, err := p.build()
			if err != nil {
				return err
			}
			select {
			case built <- c:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error {
		for c := range built {
			if err := dbtx.Run(gctx, db, c.insert(gctx)); err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	return dbtx.Run(ctx, db, p.saveHeads(ctx))
}

// prefiller is a prefill under way.
type prefiller struct {
	maker        *rowMaker
	total, calls int
	done         int
	callsDone    int
}

// prefillChunkRows is one transaction's rows: calls are the cached calls
// among them, whose change numbers follow seq.
type prefillChunkRows struct {
	rows, calls []bufferRow
	seq         int64
}

func (c prefillChunkRows) insert(ctx context.Context) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		if err := insertBuffer(ctx, tx, c.rows); err != nil {
			return err
		}
		return insertTracking(ctx, tx, c.calls, c.seq)
	}
}

// build makes the next prefillChunk rows.
func (p *prefiller) build() (prefillChunkRows, error) {
	end := min(p.done+prefillChunk, p.total)
	c := prefillChunkRows{rows: make([]bufferRow, 0, end-p.done), seq: int64(p.callsDone)}
	now := time.Now()
	for i := p.done; i < end; i++ {
		row, err := p.next(i, len(c.calls), now)
		if err != nil {
			return c, err
		}
		if row.TrackedOperationID != "" {
			c.calls = append(c.calls, row)
		}
		c.rows = append(c.rows, row)
	}
	p.done, p.callsDone = end, p.callsDone+len(c.calls)
	return c, nil
}

// next is row i: a call when the calls' even share steps up at i, else a
// notification. pending is how many calls the chunk has made so far.
func (p *prefiller) next(i, pending int, now time.Time) (bufferRow, error) {
	if (i+1)*p.calls/p.total > i*p.calls/p.total {
		return p.maker.call(callID(p.callsDone+pending), now)
	}
	return p.maker.notification(now)
}

// saveHeads records the node's chain head and the change counter, so the
// site carries on from the prefilled rows as from its own.
func (p *prefiller) saveHeads(ctx context.Context) func(*sql.Tx) error {
	return func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO chain (node, last_hlc, head) VALUES (?, ?, ?)
			ON CONFLICT (node) DO UPDATE SET last_hlc = excluded.last_hlc, head = excluded.head`,
			benchNode, p.maker.last.String(), p.maker.link)
		if err != nil {
			return fmt.Errorf("save chain head: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE name = 'tracking_seq'`, p.callsDone); err != nil {
			return fmt.Errorf("save change counter: %w", err)
		}
		return nil
	}
}
