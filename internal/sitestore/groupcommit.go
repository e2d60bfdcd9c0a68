package sitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned for a write to a closed store.
var ErrClosed = errors.New("site store is closed")

// Group commit defaults: a batch holds up to 256 rows and waits at most 2 ms
// for more callers, and only for callers coming back together
// (worthWaiting). Measured on 2 cores (outpost bench): one fsync per 256
// rows is past the point where bigger batches help, and at 5,000
// operations/s offered the p99 is 7-9.5 ms.
const (
	DefaultCommitBatch = 256
	DefaultCommitDelay = 2 * time.Millisecond
)

// appendChunk is the most rows of enqueues one multi-row insert writes
// (flushAppended). Per row, 16-row inserts cost the writer about an eighth
// less CPU than one insert a row; 64-row ones no less than 16-row ones.
const appendChunk = 16

// writeTx is the transaction one batch of writes shares. Every write goes
// through exec or execPrepared, so a store that replicates records each
// statement for its standby (replication.go).
type writeTx struct {
	tx  *sql.Tx
	ctx context.Context
	// heads are the chain heads the batch advanced, saved before commit.
	heads map[string]chainHead
	// stmts are the writer's prepared statements, bound to this
	// transaction as the batch first uses each (in bound).
	stmts *writerStatements
	bound map[*sql.Stmt]*sql.Stmt
	// recorded are the batch's statements, in order, when the store
	// replicates. A standby applies received changes through tx.tx: they
	// carry their own change number.
	recording bool
	recorded  []statement
	// applied counts the rows changed by the statements of received
	// changes (execApplied), for the writer's WAL estimate.
	applied int64
	// appending is set while an enqueue's write runs (run): the rows it
	// appends wait in appended, in order, for a multi-row insert.
	appending bool
	appended  []Message
}

// stmt is s bound to the batch's transaction. Binding a statement the
// writer's connection already prepared reuses it: no SQL is parsed again.
func (tx *writeTx) stmt(s *sql.Stmt) *sql.Stmt {
	b, ok := tx.bound[s]
	if !ok {
		b = tx.tx.StmtContext(tx.ctx, s)
		tx.bound[s] = b
	}
	return b
}

// exec runs a statement that changes the file.
func (tx *writeTx) exec(query string, args ...any) (sql.Result, error) {
	tx.record(query, args)
	return tx.tx.ExecContext(tx.ctx, query, args...)
}

// execPrepared runs the writer's prepared statement s, whose text is query.
func (tx *writeTx) execPrepared(s *sql.Stmt, query string, args ...any) (sql.Result, error) {
	tx.record(query, args)
	return tx.stmt(s).ExecContext(tx.ctx, args...)
}

// txStmt is a statement prepared in the batch's transaction, for a loop
// that runs it many times.
type txStmt struct {
	tx    *writeTx
	stmt  *sql.Stmt
	query string
}

func (tx *writeTx) prepare(query string) (*txStmt, error) {
	stmt, err := tx.tx.PrepareContext(tx.ctx, query)
	if err != nil {
		return nil, err
	}
	return &txStmt{tx: tx, stmt: stmt, query: query}, nil
}

// exec runs the statement, which changes the file.
func (s *txStmt) exec(args ...any) (sql.Result, error) {
	s.tx.record(s.query, args)
	return s.stmt.ExecContext(s.tx.ctx, args...)
}

func (s *txStmt) Close() error { return s.stmt.Close() }

// execReturning runs a statement that changes the file and returns a row.
func (tx *writeTx) execReturning(query string, args ...any) *sql.Row {
	tx.record(query, args)
	return tx.tx.QueryRowContext(tx.ctx, query, args...)
}

// queryRow reads a row; reads are not replicated.
func (tx *writeTx) queryRow(query string, args ...any) *sql.Row {
	return tx.tx.QueryRowContext(tx.ctx, query, args...)
}

func (tx *writeTx) record(query string, args []any) {
	if tx.recording {
		tx.recorded = append(tx.recorded, statement{SQL: query, Args: args})
	}
}

// writerStatements are the statements every enqueue batch runs, prepared
// once for the store's life. Parsing them again for every batch was a
// sizeable share of the writer's CPU.
type writerStatements struct {
	insertBuffer, insertJobLog, readHead, saveHead *sql.Stmt
	// appendBuffer[n] and appendJobLog[n] insert n rows, each prepared on
	// first use (appendStatements).
	appendBuffer, appendJobLog [appendChunk + 1]appendStatement
	// db prepares applied, the statements of changes a standby applies,
	// each on first use: the active node sends the same few statements
	// over and over, and parsing each again was most of applying them.
	db      *sql.DB
	applied map[string]*sql.Stmt
}

// maxAppliedStatements bounds the applied statements kept prepared; the
// store runs a few dozen different ones.
const maxAppliedStatements = 256

// execApplied runs a statement of a change received from the active node,
// prepared once per text. It is not recorded: the change carries its number.
func (tx *writeTx) execApplied(query string, args ...any) error {
	ws := tx.stmts
	stmt, ok := ws.applied[query]
	if !ok && len(ws.applied) < maxAppliedStatements {
		prepared, err := ws.db.PrepareContext(tx.ctx, query)
		if err != nil {
			return err
		}
		ws.applied[query], stmt, ok = prepared, prepared, true
	}
	var res sql.Result
	var err error
	if ok {
		res, err = tx.stmt(stmt).ExecContext(tx.ctx, args...)
	} else {
		res, err = tx.tx.ExecContext(tx.ctx, query, args...)
	}
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	tx.applied += n
	return err
}

func prepareWriterStatements(ctx context.Context, db *sql.DB) (*writerStatements, error) {
	ws := writerStatements{db: db, applied: map[string]*sql.Stmt{}}
	err := prepareAll(ctx, db, []preparedQuery{
		{&ws.insertBuffer, insertBufferSQL}, {&ws.insertJobLog, insertJobLogSQL},
		{&ws.readHead, readHeadSQL}, {&ws.saveHead, saveHeadSQL},
	})
	if err != nil {
		return nil, err
	}
	return &ws, nil
}

// appendStatement is a prepared insert of several rows and its text.
type appendStatement struct {
	stmt  *sql.Stmt
	query string
}

// appendStatements are the inserts of n buffer rows and of their n
// job-log entries.
func (ws *writerStatements) appendStatements(ctx context.Context, n int) (buffer, jobLog appendStatement, err error) {
	if ws.appendBuffer[n].stmt == nil {
		b := appendStatement{query: insertRowsSQL(insertBufferSQL, insertBufferRowSQL, n)}
		j := appendStatement{query: insertRowsSQL(insertJobLogSQL, insertJobLogRowSQL, n)}
		if err := prepareAll(ctx, ws.db, []preparedQuery{{&b.stmt, b.query}, {&j.stmt, j.query}}); err != nil {
			return appendStatement{}, appendStatement{}, err
		}
		ws.appendBuffer[n], ws.appendJobLog[n] = b, j
	}
	return ws.appendBuffer[n], ws.appendJobLog[n], nil
}

// insertRowsSQL is insertOne, which ends with the values of one row
// (row), made to insert n rows.
func insertRowsSQL(insertOne, row string, n int) string {
	return insertOne + strings.Repeat(", "+row, n-1)
}

func (ws *writerStatements) close() {
	closeAll(ws.insertBuffer, ws.insertJobLog, ws.readHead, ws.saveHead)
	for n := range ws.appendBuffer {
		if ws.appendBuffer[n].stmt != nil {
			closeAll(ws.appendBuffer[n].stmt, ws.appendJobLog[n].stmt)
		}
	}
	for _, stmt := range ws.applied {
		stmt.Close()
	}
}

// execCount runs a statement in the transaction and returns how many rows
// it changed.
func (tx *writeTx) execCount(query string, args ...any) (int64, error) {
	res, err := tx.exec(query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// write is one caller's share of a batch.
type write struct {
	ctx  context.Context
	rows int
	fn   func(*writeTx) error
	// standbyOK marks a write a standby's store takes (doOnStandby).
	standbyOK bool
	// appends marks an enqueue's write: it only appends rows (run).
	appends bool
	done    chan error
}

// committer is the store's single writer: it gathers concurrent writes into
// one transaction (up to batch rows, waiting at most delay for them) and
// answers each caller only after that transaction committed, with the
// commit's error if it failed (debounce and flush). One writer
// also means the process never contends with itself for SQLite's write lock.
type committer struct {
	// conn is the writer's own connection: its page cache stays warm from
	// one batch to the next (a pooled connection would reread the pages).
	conn  *sql.Conn
	stmts *writerStatements
	// checkpoints copies the WAL into the database file beside the writer
	// (checkpoint.go).
	checkpoints *checkpointer
	batch       int
	delay       time.Duration
	// writes is unbuffered: a write is accepted only when the writer takes it.
	writes     chan *write
	exclusives chan *exclusiveOp
	// repl numbers and hands on the batches' changes when the store
	// replicates (replication.go).
	repl     replication
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	// expected is how many writes the next batch waits for: the size of
	// the last batch (how many writers are active), or 1 after a batch
	// that waited out its delay (gather).
	expected int
	// commits counts committed batches.
	commits atomic.Int64
	// check runs before every commit; its error fails the batch unwritten
	// (the store file was removed or replaced).
	check func() error
}

func newCommitter(ctx context.Context, db *sql.DB, batch int, delay time.Duration, check func() error) (*committer, error) {
	stmts, err := prepareWriterStatements(ctx, db)
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		stmts.close()
		return nil, fmt.Errorf("writer connection: %w", err)
	}
	checkpoints, err := newCheckpointer(ctx, db, conn)
	if err != nil {
		conn.Close()
		stmts.close()
		return nil, err
	}
	c := &committer{
		conn: conn, stmts: stmts, checkpoints: checkpoints, batch: batch, delay: delay, expected: 1, check: check,
		writes: make(chan *write), exclusives: make(chan *exclusiveOp), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go c.run()
	return c, nil
}

// do runs fn in the next batch and returns once that batch committed (nil)
// or failed. rows is how many buffer rows fn adds, for the batch limit. Once
// the writer took fn, do waits for the commit even if ctx ends: answering
// "failed" for a write that then commits would invite a duplicate resend.
func (c *committer) do(ctx context.Context, rows int, fn func(*writeTx) error) error {
	return c.submit(ctx, &write{ctx: ctx, rows: rows, fn: fn, done: make(chan error, 1)})
}

// doOnStandby runs fn even while the store is a standby's copy: fn applies
// changes received from the active node, or writes nothing replicated.
func (c *committer) doOnStandby(ctx context.Context, fn func(*writeTx) error) error {
	return c.submit(ctx, &write{ctx: ctx, fn: fn, standbyOK: true, done: make(chan error, 1)})
}

func (c *committer) submit(ctx context.Context, w *write) error {
	select {
	case c.writes <- w:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return ErrClosed
	}
	return <-w.done
}

// exclusive runs fn on the writer's connection between batches, outside
// any transaction: a snapshot, or a restore from one.
func (c *committer) exclusive(ctx context.Context, fn func(*sql.Conn) error) error {
	op := &exclusiveOp{fn: fn, done: make(chan error, 1)}
	select {
	case c.exclusives <- op:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return ErrClosed
	}
	return <-op.done
}

type exclusiveOp struct {
	fn   func(*sql.Conn) error
	done chan error
}

// close stops the writer after the batch in flight; closing twice is harmless.
func (c *committer) close() {
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.done
}

func (c *committer) run() {
	defer close(c.done)
	defer c.conn.Close()
	defer c.checkpoints.close()
	defer c.stmts.close()
	for {
		select {
		case <-c.stop:
			return
		case first := <-c.writes:
			batch := c.commit(first, c.gather)
			c.checkpoints.committed(operations(batch))
		case op := <-c.exclusives:
			op.done <- op.fn(c.conn)
			c.checkpoints.committed(0)
		}
	}
}

// operations is how many operations (buffer rows, or single writes) batch
// carries.
func operations(batch []*write) int {
	n := 0
	for _, w := range batch {
		n += w.rows
	}
	return n
}

// gatherFunc collects a batch that starts with first, calling arrived on
// each write, first included, as it joins.
type gatherFunc func(first *write, arrived func(*write)) []*write

// gather adds writes to first until the batch holds its row limit, or as
// many writes as the last batch (the callers it answered are likely back),
// or delay has passed. Writes already waiting are always taken: under load
// a batch grows to the callers present, and one fsync serves them all.
// It waits only when that is worth it (worthWaiting), and sets what the
// next batch expects.
func (c *committer) gather(first *write, arrived func(*write)) []*write {
	var batch []*write
	rows := 0
	add := func(w *write) {
		batch, rows = append(batch, w), rows+w.rows
		arrived(w)
	}
	add(first)
drain:
	for rows < c.batch {
		select {
		case w := <-c.writes:
			add(w)
		default:
			break drain
		}
	}
	if !c.worthWaiting(len(batch), rows) {
		c.expected = len(batch)
		return batch
	}
	timer := time.NewTimer(c.delay)
	defer timer.Stop()
	for rows < c.batch && len(batch) < c.expected {
		select {
		case w := <-c.writes:
			add(w)
		case <-timer.C:
			c.expected = 1
			return batch
		}
	}
	c.expected = len(batch)
	return batch
}

// worthWaiting reports whether a batch that found n writes (rows rows)
// waiting should wait for more. Callers coming back together, each
// answered by the last commit, leave the writer nearly empty-handed when it
// looks: a few of them are back, and the rest come within the delay.
// Writes arriving on their own schedule (scripts, each enqueue due at its
// own time) have queued during the commit, about as many as the last batch
// held: waiting for the rest only delays them, and the batch that waits
// gathers more than arrive while the next one waits, so that every batch
// would wait out the delay. So a batch waits only while it holds at most a
// quarter of the writes expected, and the one after a batch that waited out
// its delay expects no more than it finds. At 5,000 enqueues/s offered the
// p99 went from 11-14 ms to 8-9.5 ms and the p50 from 4.0-4.4 ms to 1.7-1.8
// ms, while 64 callers kept 0.94-1.02x raw batched inserts (against
// 0.96-1.04x; outpost bench --only enqueue,latency --callers 64, alternated).
func (c *committer) worthWaiting(n, rows int) bool {
	return rows < c.batch && 4*n <= c.expected
}

// commit gathers a batch from first, commits it in one transaction and
// answers each caller; it returns the batch. A replicated change went to
// the standby's feed as it committed; in sync mode the callers are answered
// once the standby applied it (or the wait gave up), off the writer's
// goroutine so the next batch goes on.
func (c *committer) commit(first *write, gather gatherFunc) []*write {
	batch, results, change := c.runBatch(first, gather)
	answer := func() {
		for i, err := range results {
			batch[i].done <- err
		}
	}
	if change != nil {
		if await := c.repl.awaitFunc(); await != nil {
			go func() {
				await(change.Number)
				answer()
			}()
			return batch
		}
	}
	answer()
	return batch
}

// runBatch gathers a batch from first and returns each write's outcome,
// with the change it made when the store replicates. Each write runs as it
// arrives, in a transaction begun for the first: the SQL of the writes
// already there overlaps the time their neighbours' callers take to come
// back, where the writer used to wait idle (about 15% of its time at 64
// callers). The transaction's write lock is held meanwhile, at most delay
// longer than before; readers are not blocked (WAL). The rows of enqueues
// go in appendChunk at a time (run, flushAppended): most of them still as
// the callers come back, and the rest, fewer than appendChunk, before the
// commit. Inserting the rows waiting whenever the writer would wait for a
// caller, as few as one, cost more CPU per row at 64 callers (BenchmarkNotify)
// than it gained: on 2 cores the callers need that CPU to come back.
//
// A write that fails (a duplicate id, an operation already terminal) gets
// its error; the writes after it are gathered but not run, and the batch
// runs again without it in a fresh transaction (retry): failures are rare,
// so the common path pays for no savepoints. When the file check, the
// chain heads or the commit fail, every write that ran gets that error:
// none of it is on disk.
func (c *committer) runBatch(first *write, gather gatherFunc) ([]*write, []error, *Change) {
	wtx, err := c.begin()
	if err != nil {
		return failAll(gather(first, func(*write) {}), err)
	}
	defer wtx.tx.Rollback() // a no-op after Commit
	standby := c.repl.standby.Load()
	var results []error
	ran, failed := 0, false
	batch := gather(first, func(w *write) {
		err := refusal(w, standby)
		if err == nil && !failed {
			ran++
			err = wtx.run(w)
			failed = err != nil
			if errors.As(err, new(*appendedRowsError)) {
				err = nil // not necessarily w's: retry finds whose it is
			}
		}
		results = append(results, err)
	})
	if !failed {
		failed = wtx.flushAppended() != nil // retry finds whose row failed
	}
	switch {
	case failed:
		wtx.tx.Rollback()
		return batch, results, c.retry(batch, results)
	case ran == 0:
		return batch, results, nil
	}
	change, err := c.finish(wtx)
	if err != nil {
		for i := range results {
			if results[i] == nil {
				results[i] = err
			}
		}
	}
	return batch, results, change
}

// refusal is why w is not run: its caller gave up before its turn, or the
// store is a standby's copy and w is not a standby's write.
func refusal(w *write, standby bool) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if standby && !w.standbyOK {
		return ErrStandby
	}
	return nil
}

// run runs w in the batch. An enqueue's rows wait to go in with those of
// the enqueues after it, by one multi-row insert (flushAppended); any other
// write first has them inserted, so it finds the buffer and the job log as
// if every row had gone in at once.
func (tx *writeTx) run(w *write) error {
	if !w.appends {
		if err := tx.flushAppended(); err != nil {
			return err
		}
	}
	tx.appending = w.appends
	err := w.fn(tx)
	tx.appending = false
	return err
}

// appendedRowsError is a failed insert of enqueued rows that waited for a
// multi-row insert: it belongs to the write of one of those rows, not to
// the one running when it failed.
type appendedRowsError struct{ err error }

func (e *appendedRowsError) Error() string { return e.err.Error() }
func (e *appendedRowsError) Unwrap() error { return e.err }

// failAll answers every write of batch with err.
func failAll(batch []*write, err error) ([]*write, []error, *Change) {
	results := make([]error, len(batch))
	for i := range results {
		results[i] = err
	}
	return batch, results, nil
}

// retry commits the writes of batch whose results are still nil, after one
// of the batch failed: each attempt runs them in a fresh transaction, and
// a write that fails again gets its error and leaves the next attempt.
// The writes run one after the other, each with its own inserts (not
// run): a failing multi-row insert could not tell whose row failed.
func (c *committer) retry(batch []*write, results []error) *Change {
	var run []int
	for i, err := range results {
		if err == nil {
			run = append(run, i)
		}
	}
	for len(run) > 0 {
		failed, change, err := c.tryBatch(batch, run)
		if failed < 0 {
			for _, i := range run {
				results[i] = err
			}
			return change
		}
		results[run[failed]] = err
		run = append(run[:failed], run[failed+1:]...)
	}
	return nil
}

// tryBatch runs the writes run indexes in one transaction. It returns the
// position in run of the first write that failed, with its error (nothing
// committed), or -1 with the outcome of the commit and, when the store
// replicates, the change the batch made.
func (c *committer) tryBatch(batch []*write, run []int) (int, *Change, error) {
	wtx, err := c.begin()
	if err != nil {
		return -1, nil, err
	}
	defer wtx.tx.Rollback() // a no-op after Commit
	for pos, i := range run {
		if err := batch[i].fn(wtx); err != nil {
			return pos, nil, err
		}
	}
	change, err := c.finish(wtx)
	return -1, change, err
}

// begin starts a batch's transaction on the writer's connection.
func (c *committer) begin() (*writeTx, error) {
	ctx := context.Background() // the batch is shared: no caller's ctx may cancel it
	tx, err := c.conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return &writeTx{tx: tx, ctx: ctx, heads: map[string]chainHead{}, stmts: c.stmts, bound: map[*sql.Stmt]*sql.Stmt{},
		recording: c.repl.enabled.Load()}, nil
}

// finish saves the batch's chain heads and commits it, returning the
// change it made when the store replicates. It first checks that the file
// is still the one the store opened, right before the commit: a batch
// gathers for up to delay, and a write that joined it after the file was
// removed or replaced would otherwise commit into the lost file.
func (c *committer) finish(wtx *writeTx) (*Change, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if err := saveHeads(wtx); err != nil {
		return nil, err
	}
	change, err := numberChange(wtx)
	if err != nil {
		return nil, err
	}
	if change != nil {
		c.repl.committing(*change)
	}
	if err := wtx.tx.Commit(); err != nil {
		if change != nil {
			c.repl.withdraw(*change)
		}
		return nil, fmt.Errorf("commit: %w", err)
	}
	c.commits.Add(1)
	c.checkpoints.applied(wtx.applied)
	return change, nil
}
