package sitestore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// changeLog collects a replicating store's changes, as the site daemon's
// feed does.
type changeLog struct {
	mu      sync.Mutex
	changes []Change
}

func (l *changeLog) Add(c Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = append(l.changes, c)
}

func (l *changeLog) Withdraw(c Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.changes = slices.DeleteFunc(l.changes, func(x Change) bool { return x.Number >= c.Number })
}

func (l *changeLog) all() []Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.changes)
}

func openPair(t *testing.T) (active, standby *Store, log *changeLog) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	active = openTest(t, filepath.Join(dir, "a.db"), nil)
	standby = openTest(t, filepath.Join(dir, "b.db"), nil)
	log = &changeLog{}
	require.NoError(t, active.EnableReplication(ctx, log, nil))
	require.NoError(t, standby.EnableReplication(ctx, nil, nil))
	standby.SetStandby(true)
	return active, standby, log
}

// dumpTables is every row of the tables a resync copies, and of meta but
// store_id, as text: two copies hold the same data when their dumps match.
func dumpTables(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	for _, table := range append(slices.Clone(copiedTables), "meta") {
		rows, err := s.db.Query(`SELECT * FROM ` + table + ` ORDER BY 1`)
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			if table == "meta" && vals[0] == "store_id" {
				continue
			}
			fmt.Fprintf(&b, "%s %v\n", table, vals)
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return b.String()
}

// makeTraffic runs every kind of write the site makes.
func makeTraffic(t *testing.T, s *Store, from int) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Enqueue(ctx, msg(from), msg(from+1), msg(from+2))
	require.NoError(t, err)
	keyed := msg(from + 3)
	keyed.RequestHash = []byte("hash")
	_, err = s.Enqueue(ctx, keyed)
	require.NoError(t, err)
	op := fmt.Sprintf("op-%d", from)
	_, err = s.BeginOperation(ctx, NewOperation{OperationID: op, Kind: contract.KindExternalCall, Target: "erp",
		Payload: []byte(`{}`), Provenance: Provenance{SiteID: "plant-1", Node: "node-a"}})
	require.NoError(t, err)
	at, next := time.Now(), time.Now().Add(time.Minute)
	_, err = s.RecordAttempt(ctx, Attempt{OperationID: op, Status: contract.StatusRetrying, RetryCount: 1, LastError: "busy", At: &at, NextAttemptAt: &next})
	require.NoError(t, err)
	require.NoError(t, s.RecordFailedAttempt(ctx, msg(from).ID, at, next, "central away"))
	require.NoError(t, s.Delete(ctx, msg(from+1).ID))
	require.NoError(t, s.MarkHandedOff(ctx, op))
	require.NoError(t, s.AdvanceTelemetryCursor(ctx, 1))
}

// The standby that applies the active's changes in order holds the same
// rows, and stands at the same position.
func TestStandbyApplyingChangesHoldsTheSameRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	active, standby, log := openPair(t)
	makeTraffic(t, active, 0)
	makeTraffic(t, active, 10)
	changes := log.all()
	require.NotEmpty(t, changes)
	for i, c := range changes {
		require.Equal(t, int64(i+1), c.Number, "changes are numbered one after another")
	}
	require.NoError(t, standby.ApplyChanges(ctx, changes[:3]))
	require.NoError(t, standby.ApplyChanges(ctx, changes[3:]))
	require.Equal(t, dumpTables(t, active), dumpTables(t, standby))
	pa, err := active.Position(ctx)
	require.NoError(t, err)
	pb, err := standby.Position(ctx)
	require.NoError(t, err)
	require.Equal(t, pa, pb)
	require.Equal(t, changes[len(changes)-1].Number, pa.Number)
}

// A change out of order, repeated, or whose bytes do not match its
// checksum is refused with ErrResync, and nothing of its batch is applied.
func TestStandbyRefusesChangesThatDoNotFollowOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	active, standby, log := openPair(t)
	makeTraffic(t, active, 0)
	changes := log.all()
	require.NoError(t, standby.ApplyChanges(ctx, changes[:2]))
	before := dumpTables(t, standby)

	require.ErrorIs(t, standby.ApplyChanges(ctx, changes[3:4]), ErrResync, "a gap")
	require.ErrorIs(t, standby.ApplyChanges(ctx, changes[1:3]), ErrResync, "a repeat")
	tampered := changes[2]
	tampered.Data = slices.Clone(tampered.Data)
	tampered.Data[len(tampered.Data)-1] ^= 1
	require.ErrorIs(t, standby.ApplyChanges(ctx, []Change{tampered}), ErrResync, "bytes that do not match the checksum")
	require.Equal(t, before, dumpTables(t, standby), "nothing of a refused batch is applied")
	require.NoError(t, standby.ApplyChanges(ctx, changes[2:]))
}

// A standby's store takes no operation of its own.
func TestStandbyStoreRefusesWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, standby, _ := openPair(t)
	_, err := standby.Enqueue(ctx, msg(1))
	require.ErrorIs(t, err, ErrStandby)
	require.NoError(t, standby.Ping(ctx), "a standby still answers its readiness probe")
	standby.SetStandby(false)
	_, err = standby.Enqueue(ctx, msg(1))
	require.NoError(t, err)
}

// A full resync from a snapshot leaves the copy identical to the active
// and at its position, keeps the copy's own store id, and the stream goes
// on from there.
func TestResyncFromSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	active, standby, log := openPair(t)
	makeTraffic(t, active, 0)
	standbyID, err := standby.StoreID(ctx)
	require.NoError(t, err)
	// The standby diverged: it applied something of its own while active.
	standby.SetStandby(false)
	_, err = standby.Enqueue(ctx, msg(99))
	require.NoError(t, err)
	standby.SetStandby(true)

	snap := filepath.Join(t.TempDir(), "snap.db")
	pos, err := active.Snapshot(ctx, snap)
	require.NoError(t, err)
	restored, err := standby.Restore(ctx, snap)
	require.NoError(t, err)
	require.Equal(t, pos, restored)
	require.Equal(t, dumpTables(t, active), dumpTables(t, standby))
	id, err := standby.StoreID(ctx)
	require.NoError(t, err)
	require.Equal(t, standbyID, id, "the copy keeps its own store id")

	seen := len(log.all())
	makeTraffic(t, active, 20)
	require.NoError(t, standby.ApplyChanges(ctx, log.all()[seen:]))
	require.Equal(t, dumpTables(t, active), dumpTables(t, standby))
}

// Every table of the file is copied by a resync, or is the node's own.
// A migration that adds a table fails this until copiedTables names it.
func TestResyncCopiesEveryTable(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	rows, err := s.db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		if name != "meta" && name != "replication" {
			require.Contains(t, copiedTables, name, "a resync must copy table %s", name)
		}
	}
	require.NoError(t, rows.Err())
}

// A node handing over gives the active every operation it never
// received: the buffer rows, tracking rows, idempotency keys and job-log
// entries past the active's head of their chain. What the active received
// it keeps as it is, even when it has since handed it off.
func TestAdoptAddsOnlyWhatTheActiveLacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	active, standby, log := openPair(t)
	makeTraffic(t, active, 0)
	require.NoError(t, standby.ApplyChanges(ctx, log.all()))
	// The old active accepts more that never reached the other node.
	seen := len(log.all())
	_, err := active.Enqueue(ctx, msg(50), msg(51))
	require.NoError(t, err)
	_, err = active.BeginOperation(ctx, NewOperation{OperationID: "op-late", Kind: contract.KindExternalCall, Target: "erp",
		Payload: []byte(`{}`), Provenance: Provenance{SiteID: "plant-1", Node: "node-a"}})
	require.NoError(t, err)
	require.Greater(t, len(log.all()), seen)

	h, err := active.HandoverSet(ctx)
	require.NoError(t, err)
	standby.SetStandby(false) // it took over, and handed off a notification it had received
	require.NoError(t, standby.Delete(ctx, msg(2).ID))
	added, err := standby.Adopt(ctx, h)
	require.NoError(t, err)
	require.Equal(t, 3, added, "two notifications and the late call")
	_, err = standby.Get(ctx, msg(2).ID)
	require.ErrorIs(t, err, ErrNotFound, "what it received and handed off is not adopted again")
	chain, err := standby.ReadJobLog(ctx, "node-a", nil)
	require.NoError(t, err)
	requireLogChain(t, chain)
	ids := jobIDs(chain)
	require.Equal(t, []string{"m-050", "m-051", "op-late"}, ids[len(ids)-3:], "the adopted entries extend the chain")
	row, err := standby.GetOperation(ctx, "op-late")
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, row.Status)
	got, err := standby.Get(ctx, "op-0")
	require.NoError(t, err)
	require.True(t, got.TrackedOperationID == "op-0")
	handedOff, err := standby.HandedOff(ctx, "op-0")
	require.NoError(t, err)
	require.True(t, handedOff, "a call handed off stays handed off")
	again, err := standby.Adopt(ctx, h)
	require.NoError(t, err)
	require.Zero(t, again, "adopting twice adds nothing")
}

// Every argument kind the store passes survives the encoding.
func TestStatementsRoundTrip(t *testing.T) {
	t.Parallel()
	in := []statement{
		{SQL: "A", Args: []any{nil, int64(-5), 7, 1.5, "text", []byte{0, 1}, true, contract.StatusParked, sql.Named("id", "x")}},
		{SQL: "B"},
	}
	data, err := encodeStatements(nil, in)
	require.NoError(t, err)
	out, err := decodeStatements(data)
	require.NoError(t, err)
	require.Equal(t, []statement{
		{SQL: "A", Args: []any{nil, int64(-5), int64(7), 1.5, "text", []byte{0, 1}, int64(1), "Parked", sql.Named("id", "x")}},
		{SQL: "B"},
	}, out)
	for cut := range data {
		_, err := decodeStatements(data[:cut])
		require.Error(t, err, "a change cut at byte %d", cut)
	}
	_, err = encodeStatements(nil, []statement{{SQL: "C", Args: []any{time.Now()}}})
	require.Error(t, err, "a time must be passed as Unix nanoseconds")
}

// A change is encoded into one allocation, whatever its arguments: grown by
// appending, each change was copied at every doubling of its buffer (a
// quarter of what a replicating daemon allocated). The statements are as
// big as a batch's: a multi-row insert of 512-byte payloads.
func TestStatementsEncodeInOneAllocation(t *testing.T) {
	payload := strings.Repeat("p", 512)
	var args []any
	for range 64 {
		args = append(args, nil, int64(-5), 7, 1.5, payload, []byte(payload), []byte(nil), true,
			contract.StatusParked, sql.Named("id", payload))
	}
	stmts := []statement{{SQL: strings.Repeat("INSERT INTO buffer VALUES (?, ?, ?, ?, ?), ", 64), Args: args}, {SQL: "B"}}
	data, err := encodeStatements(nil, stmts)
	require.NoError(t, err)
	require.LessOrEqual(t, len(data), statementsSize(stmts), "statementsSize must bound what encodeStatements writes")
	allocs := testing.AllocsPerRun(20, func() { _, _ = encodeStatements(nil, stmts) })
	require.Equal(t, 1.0, allocs, "allocations to encode a change")
	changes := []Change{{Number: 1, Prev: []byte("p"), Checksum: []byte("c"), Data: data}, {Number: 2, Data: data}}
	require.Equal(t, 1.0, testing.AllocsPerRun(20, func() { MarshalChanges(changes) }), "allocations to marshal an answer")
}

// A standby that applies the active node's changes one commit at a time
// checkpoints as its active node does: its WAL grows no larger than the
// active's. Its own writes are none (the changes are the active's), so the
// writer must count the rows the applied statements change; counted as
// nothing, the standby checkpointed every walPagesPerCheckpoint /
// walPagesPerCommit applied commits (32) instead of every
// commitsPerCheckpoint (20), and its WAL grew to 1.6 times the active's.
func TestStandbyCheckpointsAsOftenAsItsActive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	active, standby, log := openPair(t)
	const commits, rows = 100, 64
	payload := []byte(strings.Repeat("x", 1024))
	for c := range commits {
		msgs := make([]NewMessage, rows)
		for i := range msgs {
			msgs[i] = msg(c*rows + i)
			msgs[i].Payload = payload
		}
		_, err := active.Enqueue(ctx, msgs...)
		require.NoError(t, err)
	}
	changes := log.all()
	require.Len(t, changes, commits, "one change a commit")
	for _, c := range changes {
		require.NoError(t, standby.ApplyChanges(ctx, []Change{c}))
	}
	require.Equal(t, dumpTables(t, active), dumpTables(t, standby))
	activeWAL, standbyWAL := walSize(t, active), walSize(t, standby)
	t.Logf("%d commits of %d 1 KiB rows: WAL at its largest %d bytes on the active node, %d on the standby", commits, rows, activeWAL, standbyWAL)
	require.LessOrEqual(t, standbyWAL, activeWAL*5/4, "the standby's WAL grows no larger than its active node's")
}

// walSize is the size of s's WAL file: the most it held, as SQLite writes
// it over from its beginning after a checkpoint instead of shrinking it.
func walSize(t *testing.T, s *Store) int64 {
	t.Helper()
	var path string
	require.NoError(t, s.db.QueryRow(`SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path))
	info, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	return info.Size()
}
