package sitestore

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/hlc"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
)

// requireChain checks every buffered row links to the one before it, in HLC
// order, from the start of node-a's chain.
func requireChain(t *testing.T, s *Store, want int) {
	t.Helper()
	due, err := s.Due(context.Background(), time.Now().Add(time.Hour), want+1)
	require.NoError(t, err)
	require.Len(t, due, want)
	prev := []byte{}
	for _, m := range due {
		require.Equal(t, string(prev), string(m.PrevLink), "row %s links to the row before it", m.ID)
		require.Equal(t, hlc.Link(prev, m.ID, m.HLC, hlc.PayloadHash(m.Payload)), m.Link)
		prev = m.Link
	}
}

// enqueueFromCallers enqueues message(0) to message(callers*each-1) from
// callers goroutines at once, each enqueue its own call, and requires
// every one to succeed.
func enqueueFromCallers(t *testing.T, s *Store, callers, each int, message func(int) NewMessage) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				_, err := s.Enqueue(context.Background(), message(c*each+i))
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// 64 concurrent callers: every enqueue is stored once, the chain is
// unbroken, and the rows share far fewer commits than there were enqueues.
func TestConcurrentEnqueuesShareCommits(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	const callers, each = 64, 20
	enqueueFromCallers(t, s, callers, each, msg)
	requireChain(t, s, callers*each)
	commits := s.Commits()
	t.Logf("%d enqueues in %d commits", callers*each, commits)
	require.Less(t, commits, int64(callers*each/4), "concurrent enqueues share commits")
}

// One write of a batch fails (a duplicate id): only its caller gets the
// error, the others commit, and the chain skips the failed row.
func TestFailedWriteLeavesTheRestOfItsBatch(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	ctx := context.Background()
	_, err := s.Enqueue(ctx, msg(1))
	require.NoError(t, err)

	batch := []*write{enqueueWrite(s, msg(2)), enqueueWrite(s, msg(1)), enqueueWrite(s, msg(3))}
	commitGiven(s, batch)
	require.NoError(t, <-batch[0].done)
	require.ErrorContains(t, <-batch[1].done, "UNIQUE")
	require.NoError(t, <-batch[2].done)
	requireChain(t, s, 3)
}

// A duplicate id among rows that wait for a multi-row insert: the insert
// fails while a later enqueue runs, yet only the duplicate's caller gets
// the error, and the rest of the batch commits.
func TestFailedMultiRowInsertFailsOnlyItsRowsWrite(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	_, err := s.Enqueue(context.Background(), msg(0))
	require.NoError(t, err)
	var batch []*write
	for i := range appendChunk + 2 {
		batch = append(batch, enqueueWrite(s, msg(i+1)))
	}
	batch[3] = enqueueWrite(s, msg(0))
	commitGiven(s, batch)
	for i, w := range batch {
		if i == 3 {
			require.ErrorContains(t, <-w.done, "UNIQUE")
			continue
		}
		require.NoError(t, <-w.done, "write %d", i)
	}
	requireChain(t, s, appendChunk+2)
}

// A write whose caller gave up before its batch ran is not written.
func TestCancelledWriteIsNotWritten(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	cancelled := enqueueWrite(s, msg(1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cancelled.ctx = ctx
	batch := []*write{cancelled, enqueueWrite(s, msg(2))}
	commitGiven(s, batch)
	require.ErrorIs(t, <-batch[0].done, context.Canceled)
	require.NoError(t, <-batch[1].done)
	_, err := s.Get(context.Background(), msg(1).ID)
	require.ErrorIs(t, err, ErrNotFound)
	requireChain(t, s, 1)
}

// When the commit itself fails, every caller of the batch gets the error.
func TestFailedCommitFailsEveryCaller(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	require.NoError(t, s.writer.conn.Close()) // the file is gone from under the writer
	batch := []*write{enqueueWrite(s, msg(1)), enqueueWrite(s, msg(2))}
	commitGiven(s, batch)
	for _, w := range batch {
		require.ErrorIs(t, <-w.done, sql.ErrConnDone)
	}
}

// A closed store refuses writes with ErrClosed.
func TestClosedStoreRefusesWrites(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	require.NoError(t, s.Close())
	_, err := s.Enqueue(context.Background(), msg(1))
	require.ErrorIs(t, err, ErrClosed)
}

// The writer runs each write as it joins the batch, not once the batch is
// gathered: its SQL overlaps the wait for the rest.
func TestWritesRunAsTheyJoinTheBatch(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	var ran []int
	counted := func(n int, m NewMessage) *write {
		w := enqueueWrite(s, m)
		fn := w.fn
		w.fn = func(tx *writeTx) error { ran = append(ran, n); return fn(tx) }
		return w
	}
	batch := []*write{counted(1, msg(1)), counted(2, msg(2))}
	var ranBeforeSecond []int
	s.writer.commit(batch[0], func(first *write, arrived func(*write)) []*write {
		arrived(first)
		ranBeforeSecond = append(ranBeforeSecond, ran...)
		arrived(batch[1])
		return batch
	})
	require.Equal(t, []int{1}, ranBeforeSecond, "the first write ran before the second joined")
	for _, w := range batch {
		require.NoError(t, <-w.done)
	}
	require.Equal(t, int64(1), s.Commits(), "both writes shared one commit")
	requireChain(t, s, 2)
}

// The rows of a batch's enqueues go in by multi-row inserts, appendChunk
// rows each, not a statement per row: a statement's fixed cost (binding,
// stepping, resetting) was a tenth of the writer's time at 64 callers.
// Another write of the batch (here one that records what ran) runs after
// the rows before it are in.
func TestEnqueuedRowsGoInByMultiRowInserts(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	var inserts []statement
	record := &write{ctx: context.Background(), done: make(chan error, 1), fn: func(tx *writeTx) error {
		tx.recording = true
		return nil
	}}
	inspect := &write{ctx: context.Background(), done: make(chan error, 1), fn: func(tx *writeTx) error {
		for _, st := range tx.recorded {
			if strings.HasPrefix(st.SQL, "INSERT INTO buffer") {
				inserts = append(inserts, st)
			}
		}
		tx.recording, tx.recorded = false, nil
		return nil
	}}
	batch := []*write{record}
	for i := range appendChunk + 1 {
		batch = append(batch, enqueueWrite(s, msg(i)))
	}
	commitGiven(s, append(batch, inspect))
	for _, w := range batch {
		require.NoError(t, <-w.done)
	}
	require.NoError(t, <-inspect.done)
	require.Equal(t, 2, len(inserts), "one insert of appendChunk rows, one of the row after them")
	require.Len(t, inserts[0].Args, appendChunk*bufferColumns)
	requireChain(t, s, appendChunk+1)
}

// The store file is replaced while a batch gathers: the batch commits
// nothing, and every caller hears why, also the one that joined before
// the file went. Committed, their writes would be in the lost file.
func TestBatchFailsWhenItsFileIsReplacedWhileItGathers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "site.db")
	s := openTest(t, path, nil)
	batch := []*write{enqueueWrite(s, msg(1)), enqueueWrite(s, msg(2))}
	s.writer.commit(batch[0], func(first *write, arrived func(*write)) []*write {
		arrived(first)
		for _, suffix := range []string{"", "-wal", "-shm"} {
			require.NoError(t, os.Remove(path+suffix))
		}
		require.NoError(t, os.WriteFile(path, nil, 0o644))
		arrived(batch[1])
		return batch
	})
	for _, w := range batch {
		require.ErrorIs(t, <-w.done, sqlitedb.ErrReplaced)
	}
	require.Zero(t, s.Commits())
}

// commitGiven commits batch as one batch, its writes joining in order.
func commitGiven(s *Store, batch []*write) {
	s.writer.commit(batch[0], func(_ *write, arrived func(*write)) []*write {
		for _, w := range batch {
			arrived(w)
		}
		return batch
	})
}

// enqueueWrite is the write Enqueue hands the writer, for driving a batch by hand.
func enqueueWrite(s *Store, m NewMessage) *write {
	return s.enqueueWrite(context.Background(), []NewMessage{m}, new([]Message))
}

// Under a steady stream of commits the WAL is copied into the database
// file and started over, so it stays a fraction of the data written. With
// no checkpoints, or with background checkpoints that never let it start
// over (checkpoint.go), it would hold every commit: more than the file.
func TestCheckpointsKeepTheWALSmall(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "site.db")
	s := openTest(t, path, nil)
	const callers, each = 64, 200
	payload := []byte(strings.Repeat("x", 1024))
	enqueueFromCallers(t, s, callers, each, func(i int) NewMessage {
		m := msg(i)
		m.Payload = payload
		return m
	})
	db, err := os.Stat(path)
	require.NoError(t, err)
	wal, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	t.Logf("%d enqueues in %d commits: database file %d bytes, WAL %d bytes at its largest", callers*each, s.Commits(), db.Size(), wal.Size())
	require.Greater(t, db.Size(), int64(callers*each*1024), "the checkpoints copied the rows into the database file")
	require.Less(t, wal.Size(), db.Size(), "the WAL started over after its checkpoints")
}

// gatherer is a writer for gather alone: waiting writes already on its
// queue, a last batch of expected writes, and delay. It returns the writer
// and the batch's first write.
func gatherer(waiting, expected int, delay time.Duration) (*committer, *write) {
	c := &committer{writes: make(chan *write, 64), batch: DefaultCommitBatch, delay: delay, expected: expected}
	for range waiting {
		c.writes <- &write{rows: 1}
	}
	return c, &write{rows: 1}
}

// Writes that queued during the last commit, more than a quarter of the
// last batch, go at once: they arrive on their own schedule, and waiting
// for the rest would only delay them.
func TestGatherTakesQueuedWritesWithoutWaiting(t *testing.T) {
	t.Parallel()
	c, first := gatherer(3, 8, 5*time.Second)
	start := time.Now()
	batch := c.gather(first, func(*write) {})
	require.Len(t, batch, 4)
	require.Less(t, time.Since(start), time.Second, "the batch did not wait for the delay")
	require.Equal(t, 4, c.expected, "the next batch expects this one's size")
}

// Callers answered together come back together: a batch that finds only a
// few of them waits, up to the delay, for as many as the last batch held.
func TestGatherWaitsForCallersComingBack(t *testing.T) {
	t.Parallel()
	c, first := gatherer(1, 8, time.Minute)
	go func() {
		time.Sleep(20 * time.Millisecond)
		for range 6 {
			c.writes <- &write{rows: 1}
		}
	}()
	batch := c.gather(first, func(*write) {})
	require.Len(t, batch, 8, "the batch waited for the callers coming back")
	require.Equal(t, 8, c.expected)
}

// A batch that waited out its delay tells the writer its callers do not
// come back together: the next batch expects only what it finds.
func TestGatherAfterWaitingOutTheDelayExpectsOne(t *testing.T) {
	t.Parallel()
	c, first := gatherer(1, 8, 100*time.Millisecond)
	batch := c.gather(first, func(*write) {})
	require.Len(t, batch, 2, "two of eight: the batch waited, and nothing more came")
	require.Equal(t, 1, c.expected)
}
