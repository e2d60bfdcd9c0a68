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
		f.add(sitestore.Change{Number: int64(i), Prev: []byte{byte(i - 1)}, Checksum: []byte{byte(i)}, Data: make([]byte, 10), At: time.Now()})
	}
	return f
}

// The feed answers a position on its stream with what follows, and a
// position off it (behind what it keeps, ahead, another checksum) with
// ErrResync, which acknowledges nothing; once the standby applied changes,
// the feed keeps only the last feedKeepApplied of them.
func TestChangeFeedFollowsAndTrims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := feedOf(2000)
	got, err := f.after(ctx, sitestore.Position{Number: 10, Checksum: []byte{10}}, 0, 5)
	require.NoError(t, err)
	require.Len(t, got, 5)
	require.Equal(t, int64(11), got[0].Number)
	_, err = f.after(ctx, sitestore.Position{Number: 10, Checksum: []byte{99}}, 0, 5)
	require.ErrorIs(t, err, sitestore.ErrResync, "another checksum at the same number")
	_, err = f.after(ctx, sitestore.Position{Number: 2001, Checksum: []byte{1}}, 0, 5)
	require.ErrorIs(t, err, sitestore.ErrResync, "ahead of the feed")

	got, err = f.after(ctx, sitestore.Position{Number: 1990, Checksum: []byte{byte(1990 % 256)}}, 0, 100)
	require.NoError(t, err)
	require.Len(t, got, 10)
	require.Equal(t, feedKeepApplied+10, len(f.changes), "applied changes beyond the kept ones are dropped")
	_, err = f.after(ctx, sitestore.Position{Number: 10, Checksum: []byte{10}}, 0, 5)
	require.ErrorIs(t, err, sitestore.ErrResync, "behind what the feed keeps")
	n, _ := f.lag(time.Now())
	require.Equal(t, int64(10), n)
}
