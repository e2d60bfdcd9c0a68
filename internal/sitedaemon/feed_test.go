package sitedaemon

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// feedOf is a feed holding changes 1..n, each with a checksum naming it.
func feedOf(n int) *changeFeed {
	f := newChangeFeed(sitestore.Position{}, time.Second, time.Second, func() {})
	for i := 1; i <= n; i++ {
		f.Add(sitestore.Change{Number: int64(i), Prev: []byte{byte(i - 1)}, Checksum: []byte{byte(i)}, Data: make([]byte, 10), At: time.Now()})
	}
	return f
}

// The feed answers a position on its stream with what follows, and a
// position off it (behind what it keeps, ahead, another checksum) with
// ErrResync. Asking acknowledges nothing: the standby acknowledges what it
// applied, only on the stream and never backwards, and the feed then keeps
// only the last feedKeepApplied of the applied changes.
func TestChangeFeedFollowsAndTrims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := feedOf(2000)
	at := func(n int) sitestore.Position {
		return sitestore.Position{Number: int64(n), Checksum: []byte{byte(n % 256)}}
	}
	got, err := f.after(ctx, at(10), 0, 5)
	require.NoError(t, err)
	require.Len(t, got, 5)
	require.Equal(t, int64(11), got[0].Number)
	_, err = f.after(ctx, sitestore.Position{Number: 10, Checksum: []byte{99}}, 0, 5)
	require.ErrorIs(t, err, sitestore.ErrResync, "another checksum at the same number")
	_, err = f.after(ctx, sitestore.Position{Number: 2001, Checksum: []byte{1}}, 0, 5)
	require.ErrorIs(t, err, sitestore.ErrResync, "ahead of the feed")
	_, err = f.after(ctx, at(1990), 0, 100)
	require.NoError(t, err)
	require.Len(t, f.changes, 2000, "asking acknowledges nothing")

	require.ErrorIs(t, f.acknowledge(sitestore.Position{Number: 1990, Checksum: []byte{99}}), sitestore.ErrResync, "an acknowledgement off the stream")
	require.ErrorIs(t, f.acknowledge(sitestore.Position{Number: 2001, Checksum: []byte{1}}), sitestore.ErrResync, "an acknowledgement ahead of the stream")
	require.NoError(t, f.acknowledge(at(1990)))
	require.Equal(t, feedKeepApplied+10, len(f.changes), "applied changes beyond the kept ones are dropped")
	require.NoError(t, f.acknowledge(at(1000)), "a late acknowledgement behind the last")
	_, err = f.after(ctx, at(10), 0, 5)
	require.ErrorIs(t, err, sitestore.ErrResync, "behind what the feed keeps")
	n, _ := f.lag(time.Now())
	require.Equal(t, int64(10), n, "the late acknowledgement did not move the standby back")
}

// A sync write returns once the standby acknowledged its change, not before.
func TestChangeFeedAwaitReturnsOnAcknowledgement(t *testing.T) {
	t.Parallel()
	f := feedOf(3)
	require.NoError(t, f.acknowledge(sitestore.Position{Number: 1, Checksum: []byte{1}}), "the standby follows")
	done := make(chan struct{})
	go func() {
		f.await(3)
		close(done)
	}()
	require.NoError(t, f.acknowledge(sitestore.Position{Number: 2, Checksum: []byte{2}}))
	select {
	case <-done:
		t.Fatal("await returned before change 3 was acknowledged")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, f.acknowledge(sitestore.Position{Number: 3, Checksum: []byte{3}}))
	select {
	case <-done:
	case <-time.After(time.Second):
		t.Fatal("await did not return on the acknowledgement")
	}
}

// A change whose commit failed is taken back: a standby that took it is off
// the stream, and its acknowledgement does not count for the change the
// writer numbers in its place.
func TestChangeFeedWithdrawsAFailedCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := feedOf(3)
	third := sitestore.Position{Number: 3, Checksum: []byte{3}}
	require.NoError(t, f.acknowledge(third), "the standby applied change 3 before its commit failed")
	f.Withdraw(sitestore.Change{Number: 3, Prev: []byte{2}, Checksum: []byte{3}})
	_, err := f.after(ctx, third, 0, 5)
	require.ErrorIs(t, err, sitestore.ErrResync, "the standby holding the withdrawn change")

	f.Add(sitestore.Change{Number: 3, Prev: []byte{2}, Checksum: []byte{33}, Data: make([]byte, 10), At: time.Now()})
	got, err := f.after(ctx, sitestore.Position{Number: 2, Checksum: []byte{2}}, 0, 5)
	require.NoError(t, err)
	require.Equal(t, []byte{33}, got[0].Checksum, "the change numbered in its place")
	n, _ := f.lag(time.Now())
	require.Equal(t, int64(1), n, "change 3 is not acknowledged")
	require.ErrorIs(t, f.acknowledge(third), sitestore.ErrResync, "an acknowledgement of the withdrawn change")
}
