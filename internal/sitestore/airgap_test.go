package sitestore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// An operation leaves by air-gap once: at its first export, unless central
// had it online already. The stats add up every export and ack recorded.
func TestExportsCountEachOperationLeavingByAirgapOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "site.db"), nil)
	_, err := s.Enqueue(ctx, msg(0), msg(1), msg(2))
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, "m-002")) // handed off online
	now := time.Now()

	first, err := s.RecordExport(ctx, Transfer{BundleID: "b-1", Entries: 3, Bytes: 3000, Duration: 20 * time.Millisecond, At: now},
		[]string{"m-000", "m-001", "m-002"})
	require.NoError(t, err)
	require.Equal(t, 2, first.NewEntries, "m-002 left online")
	_, err = s.Enqueue(ctx, msg(3))
	require.NoError(t, err)
	second, err := s.RecordExport(ctx, Transfer{BundleID: "b-2", Entries: 4, Bytes: 5000, Duration: 2 * time.Second, At: now},
		[]string{"m-000", "m-001", "m-002", "m-003"})
	require.NoError(t, err)
	require.Equal(t, 1, second.NewEntries, "only m-003 is on a bundle for the first time")
	require.NoError(t, s.RecordAck(ctx, Transfer{BundleID: "r-1", Entries: 3, NewEntries: 2, Bytes: 700, Duration: time.Millisecond, At: now}))

	exports, err := s.TransferStats(ctx, TransferExport)
	require.NoError(t, err)
	require.Equal(t, int64(2), exports.Count)
	require.Equal(t, int64(3), exports.NewEntries)
	require.Equal(t, uint64(2), exports.Bytes.Count)
	require.Equal(t, 8000.0, exports.Bytes.Sum)
	require.Equal(t, uint64(1), exports.Bytes.Buckets[4<<10], "3,000 bytes is under 4 KiB, 5,000 is not")
	require.Equal(t, uint64(2), exports.Bytes.Buckets[16<<10])
	require.InDelta(t, 2.02, exports.Duration.Sum, 1e-9)
	require.Equal(t, uint64(1), exports.Duration.Buckets[0.05])
	require.Equal(t, uint64(1), exports.Duration.Buckets[1])
	require.Equal(t, uint64(2), exports.Duration.Buckets[5])

	acks, err := s.TransferStats(ctx, TransferAck)
	require.NoError(t, err)
	require.Equal(t, int64(1), acks.Count)
	require.Equal(t, int64(2), acks.NewEntries)
	require.Equal(t, uint64(1), acks.Duration.Count)
}
