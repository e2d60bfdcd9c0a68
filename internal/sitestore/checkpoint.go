package sitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// The writer checkpoints once its commits have written walPagesPerCheckpoint
// pages to the WAL and at least commitsPerCheckpoint commits went by.
// SQLite does not tell a Go program how long its WAL is, so the writer
// estimates it: a commit writes the last page of every table and index it
// touches again (about walPagesPerCommit for an enqueue), and each
// operation adds about a page (a 512-byte notification's buffer row,
// job-log entry and index entries).
//
// SQLite's own threshold, 1,000 pages, made each checkpoint long enough to
// stall the commits beside it: at 5,000 enqueues/s offered (small batches,
// a checkpoint every ~55 commits) the p99 was 14-16 ms, with the stalls
// lined up with the checkpoints. At 250 pages it was 9-10 ms, but at 64
// callers (big batches) that checkpointed every three commits and cost a
// fifth of the throughput; the floor of 20 commits keeps the cadence the
// enqueue rate was tuned at there (outpost bench --only latency and
// --only enqueue, alternated: p99 at 5,000/s 14.4, 16.5, 45.2 ms -> 12.6,
// 12.1, 12.8 ms; at 64 callers 0.97, 1.05, 1.04x -> 1.01, 1.08, 1.05x raw
// batched inserts). A site committing one operation at a time checkpoints
// every 28 commits.
const (
	walPagesPerCheckpoint = 250
	commitsPerCheckpoint  = 20
	walPagesPerCommit     = 8
)

// checkpointer copies the WAL's pages into the database file off the
// writer's path. SQLite's automatic checkpoint runs inside the commit that
// crosses its threshold: the writer copies about a thousand pages and syncs
// the database file while every caller of the next batch waits, which was
// a tenth of the writer's time at 64 callers. Here the writer's connection
// does not checkpoint on its own: once its commits have written about
// walPagesPerCheckpoint pages (above), a passive checkpoint on the checkpointer's
// own connection copies them while the writer goes on committing.
//
// A passive checkpoint cannot copy the frames committed while it ran, and
// SQLite starts the WAL from its beginning again only when every frame has
// been copied; without more, the WAL would grow for as long as writes come.
// So once the background checkpoint has finished, the writer checkpoints
// those few remaining frames itself, between two batches, and its next
// transaction starts the WAL over.
//
// A checkpoint that fails loses nothing: the pages stay in the WAL, readers
// find them there, and the next checkpoint copies them. SQLite ignores the
// errors of its automatic checkpoints for the same reason; so do these.
type checkpointer struct {
	// writer is the writer's connection, conn the checkpointer's own.
	writer, conn *sql.Conn
	// pages estimates the pages written to the WAL since the last
	// checkpoint.
	pages int
	// commits counts the writer's commits since the last checkpoint.
	commits int
	// running is set while a background checkpoint copies; done receives
	// when it has finished.
	running bool
	done    chan struct{}
}

func newCheckpointer(ctx context.Context, db *sql.DB, writer *sql.Conn) (*checkpointer, error) {
	if _, err := writer.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`); err != nil {
		return nil, fmt.Errorf("turn off the writer's automatic checkpoints: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint connection: %w", err)
	}
	return &checkpointer{writer: writer, conn: conn, done: make(chan struct{}, 1)}, nil
}

// committed is called by the writer after each of its commits, of
// operations operations, before it gathers the next batch (whose callers
// are still preparing their writes).
func (cp *checkpointer) committed(operations int) {
	cp.pages += walPagesPerCommit + operations
	cp.commits++
	select {
	case <-cp.done:
		cp.running = false
		checkpoint(cp.writer) // the frames committed while it ran
		cp.pages, cp.commits = 0, 0
	default:
	}
	if !cp.running && cp.pages >= walPagesPerCheckpoint && cp.commits >= commitsPerCheckpoint {
		cp.running = true
		go func() {
			checkpoint(cp.conn)
			cp.done <- struct{}{}
		}()
	}
}

// applied is called by a standby's writer after a commit that applied
// changes received from the active node, with the rows they changed. The
// batch itself carries no operations of the standby's own (committed sees
// none), yet it writes the active's rows: each counts as a page, as an
// operation does. Left out, a standby checkpointed every
// walPagesPerCheckpoint / walPagesPerCommit applied commits whatever they
// wrote, less often than its active node, and each checkpoint's last
// pass, on the writer's path, took longer with the WAL it had let grow:
// the standby's applies, which sync replication's callers wait for,
// stalled behind it.
func (cp *checkpointer) applied(rows int64) {
	cp.pages += int(rows)
}

// close waits for a background checkpoint still copying, then lets go of
// the checkpointer's connection.
func (cp *checkpointer) close() {
	if cp.running {
		<-cp.done
	}
	cp.conn.Close()
}

// checkpoint copies, on conn, every WAL frame no reader still needs into the
// database file, without waiting for readers or the writer.
func checkpoint(conn *sql.Conn) {
	var busy, frames, copied int
	_ = conn.QueryRowContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied)
}
