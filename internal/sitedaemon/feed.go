package sitedaemon

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// feedMaxBytes bounds the changes the active node keeps in memory for its
// standby. A standby further behind than that takes a full copy instead.
const feedMaxBytes = 256 << 20

// feedKeepApplied is how many changes the standby has applied the feed
// still keeps: a standby that restarts a moment after applying them asks
// for what follows without a full copy, and the memory of a feed whose
// standby follows stays small.
const feedKeepApplied = 1024

// changeFeed is the active node's stream of store changes for its
// standby: the latest changes in memory, in order, and what the standby
// has acknowledged applying. The store hands it every change as it
// commits (sitestore.EnableReplication); nothing the active does waits for
// the standby, but in sync mode a write's caller is answered once the
// standby applied it (await).
type changeFeed struct {
	mu      sync.Mutex
	changes []sitestore.Change // contiguous numbers, ending at head
	bytes   int
	head    sitestore.Position
	grew    chan struct{} // closed when a change is added
	// acked is the standby's last applied change, ackedAt when it last asked.
	acked   int64
	ackedAt time.Time
	ackWake chan struct{} // closed when acked moves
	// connected is how long after its last request the standby counts as
	// following the stream: sync writes wait for it only then.
	connected time.Duration
	// syncTimeout is the longest a sync write waits for the standby.
	syncTimeout time.Duration
	// unsynced counts sync writes answered without the standby's ack.
	unsynced func()
}

func newChangeFeed(head sitestore.Position, connected, syncTimeout time.Duration, unsynced func()) *changeFeed {
	return &changeFeed{head: head, grew: make(chan struct{}), ackWake: make(chan struct{}),
		connected: connected, syncTimeout: syncTimeout, unsynced: unsynced}
}

// Add appends a change as it commits. A change that does not follow the
// head (another process wrote the file) starts the feed over from it: a
// standby behind it takes a full copy.
func (f *changeFeed) Add(c sitestore.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.Number != f.head.Number+1 {
		f.changes, f.bytes = nil, 0
	}
	f.changes = append(f.changes, c)
	f.bytes += len(c.Data)
	for f.bytes > feedMaxBytes && len(f.changes) > 1 {
		f.bytes -= len(f.changes[0].Data)
		f.changes[0] = sitestore.Change{}
		f.changes = f.changes[1:]
	}
	f.head = sitestore.Position{Number: c.Number, Checksum: c.Checksum}
	close(f.grew)
	f.grew = make(chan struct{})
}

// Withdraw takes back change c, whose commit failed: the feed's head and
// the standby's acknowledgement go back before it. A standby that took it
// asks for what follows it, is off the stream and resyncs; a sync write
// never counts its acknowledgement for the change numbered in its place.
func (f *changeFeed) Withdraw(c sitestore.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.changes) > 0 && f.changes[len(f.changes)-1].Number >= c.Number {
		f.bytes -= len(f.changes[len(f.changes)-1].Data)
		f.changes = f.changes[:len(f.changes)-1]
	}
	f.head = sitestore.Position{Number: c.Number - 1, Checksum: c.Prev}
	f.acked = min(f.acked, c.Number-1)
}

// reset starts the feed over at the store's position: the node has just
// become active.
func (f *changeFeed) reset(head sitestore.Position) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes, f.bytes, f.head = nil, 0, head
	f.acked, f.ackedAt = 0, time.Time{}
}

// after returns the changes that follow pos, waiting up to wait for one
// when there is none yet. ErrResync when pos is not on this node's stream:
// older than the feed holds, ahead of it, or with another checksum (the
// standby's copy took other changes).
func (f *changeFeed) after(ctx context.Context, pos sitestore.Position, wait time.Duration, max int) ([]sitestore.Change, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		out, err := f.followingLocked(pos, max)
		grew := f.grew
		f.mu.Unlock()
		if err != nil || len(out) > 0 {
			return out, err
		}
		select {
		case <-grew:
		case <-deadline.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// acknowledge notes that the standby applied the changes up to pos, which
// must be on this node's stream (ErrResync otherwise). An acknowledgement
// behind one already taken changes nothing: the standby's pulls and its
// acknowledgements travel on separate requests.
func (f *changeFeed) acknowledge(pos sitestore.Position) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pos.Number > f.acked {
		if _, err := f.followingLocked(pos, 0); err != nil {
			return err
		}
		f.acknowledgeLocked(pos.Number)
	}
	f.ackedAt = time.Now()
	return nil
}

func (f *changeFeed) followingLocked(pos sitestore.Position, max int) ([]sitestore.Change, error) {
	if pos.Number == f.head.Number {
		if !bytes.Equal(pos.Checksum, f.head.Checksum) {
			return nil, sitestore.ErrResync
		}
		return nil, nil
	}
	if pos.Number > f.head.Number || len(f.changes) == 0 {
		return nil, sitestore.ErrResync
	}
	i := pos.Number + 1 - f.changes[0].Number
	if i < 0 || !bytes.Equal(f.changes[i].Prev, pos.Checksum) {
		return nil, sitestore.ErrResync
	}
	end := min(int(i)+max, len(f.changes))
	return append([]sitestore.Change(nil), f.changes[i:end]...), nil
}

// acknowledgeLocked notes that the standby applied change n, past the last
// it acknowledged, and drops what it no longer needs.
func (f *changeFeed) acknowledgeLocked(n int64) {
	f.acked = n
	close(f.ackWake)
	f.ackWake = make(chan struct{})
	for len(f.changes) > 0 && f.changes[0].Number <= n-feedKeepApplied {
		f.bytes -= len(f.changes[0].Data)
		f.changes[0] = sitestore.Change{}
		f.changes = f.changes[1:]
	}
}

// await returns once the standby applied change number, or at once when no
// standby follows the stream (the site keeps taking work while its standby
// is away), or after syncTimeout.
func (f *changeFeed) await(number int64) {
	timeout := time.NewTimer(f.syncTimeout)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		done := f.acked >= number
		following := time.Since(f.ackedAt) < f.connected
		wake := f.ackWake
		f.mu.Unlock()
		if done {
			return
		}
		if !following {
			f.unsynced()
			return
		}
		select {
		case <-wake:
		case <-timeout.C:
			f.unsynced()
			return
		}
	}
}

// headNumber is the number of the feed's latest change.
func (f *changeFeed) headNumber() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.head.Number
}

// lag is how far the standby is behind: in changes, and the age of the
// oldest change it has not applied (zero when it has them all).
func (f *changeFeed) lag(now time.Time) (changes int64, age time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	changes = f.head.Number - f.acked
	if changes <= 0 || len(f.changes) == 0 {
		return max(changes, 0), 0
	}
	i := f.acked + 1 - f.changes[0].Number
	if i >= 0 && i < int64(len(f.changes)) {
		age = now.Sub(f.changes[i].At)
	}
	return changes, age
}
