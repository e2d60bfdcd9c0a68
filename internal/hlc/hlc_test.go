package hlc

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNextIsMonotonicWhenTheClockStepsBack(t *testing.T) {
	t.Parallel()
	clock := []int64{1000, 1000, 1001, 900, 900, 1002}
	var last Timestamp
	var seen []Timestamp
	for _, now := range clock {
		next := Next(last, now)
		require.True(t, last.Before(next), "%v must follow %v", next, last)
		seen = append(seen, next)
		last = next
	}
	require.Equal(t, []Timestamp{{1000, 0}, {1000, 1}, {1001, 0}, {1001, 1}, {1001, 2}, {1002, 0}}, seen)
}

func TestStringSortsAndParses(t *testing.T) {
	t.Parallel()
	ts := []Timestamp{{1002, 0}, {999, 7}, {1001, 12}, {1001, 2}}
	strs := make([]string, len(ts))
	for i, x := range ts {
		strs[i] = x.String()
		back, err := Parse(strs[i])
		require.NoError(t, err)
		require.Equal(t, x, back)
	}
	sort.Strings(strs)
	require.Equal(t, []string{Timestamp{999, 7}.String(), Timestamp{1001, 2}.String(), Timestamp{1001, 12}.String(), Timestamp{1002, 0}.String()}, strs)
	_, err := Parse("yesterday")
	require.Error(t, err)
}

func TestLinkCoversEveryInput(t *testing.T) {
	t.Parallel()
	base := Link([]byte("prev"), "id", Timestamp{1, 0}, PayloadHash([]byte("p")))
	require.NotEqual(t, base, Link([]byte("prev2"), "id", Timestamp{1, 0}, PayloadHash([]byte("p"))))
	require.NotEqual(t, base, Link([]byte("prev"), "id2", Timestamp{1, 0}, PayloadHash([]byte("p"))))
	require.NotEqual(t, base, Link([]byte("prev"), "id", Timestamp{1, 1}, PayloadHash([]byte("p"))))
	require.NotEqual(t, base, Link([]byte("prev"), "id", Timestamp{1, 0}, PayloadHash([]byte("q"))))
	require.Equal(t, base, Link([]byte("prev"), "id", Timestamp{1, 0}, PayloadHash([]byte("p"))))
}
