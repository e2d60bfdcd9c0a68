package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond // unsorted on purpose
	}
	require.Equal(t, 50*time.Millisecond, percentile(ds, 0.5))
	require.Equal(t, 99*time.Millisecond, percentile(ds, 0.99))
	require.Equal(t, 100*time.Millisecond, percentile(ds, 1))
	require.Equal(t, 1*time.Millisecond, percentile(ds, 0))
	require.Equal(t, time.Duration(0), percentile(nil, 0.99))
	require.Equal(t, 100*time.Millisecond, ds[0], "the input is left as it was")
}

func TestFormatValue(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{41230.4, "/s", "41,230/s"},
		{999.5, "/s", "1,000/s"},
		{1234567, "/s", "1,234,567/s"},
		{0.456, "ms", "0.46 ms"},
		{12.34, "ms", "12.3 ms"},
		{39.53, "MiB", "39.5 MiB"},
	} {
		require.Equal(t, c.want, formatValue(c.v, c.unit))
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	row := compare(SectionEnqueue, "m", 30, "/s", Figure{Name: "b", Value: 50, Unit: "/s"})
	require.InDelta(t, 0.6, row.Ratio, 1e-9)
	require.True(t, row.atLeastRatio(0.6).Target.Pass, "a ratio on the target passes")
	require.False(t, row.atLeastRatio(0.61).Target.Pass)
	lat := compare(SectionLatency, "p99", 10, "ms", Figure{Name: "b", Value: 2, Unit: "ms"})
	require.Equal(t, "≤ 10 ms", lat.atMost(10).Target.Text)
	require.True(t, lat.atMost(10).Target.Pass)
	require.False(t, lat.atMost(9.99).Target.Pass)
}

func TestPrefillSpreadsCallsEvenly(t *testing.T) {
	t.Parallel()
	p := &prefiller{maker: newRowMaker("body"), total: 10, calls: 4}
	var kinds string
	for i := range p.total {
		row, err := p.next(i, 0, time.Now())
		require.NoError(t, err)
		if row.TrackedOperationID != "" {
			kinds += "c"
		} else {
			kinds += "n"
		}
	}
	require.Equal(t, "nncncnncnc", kinds, "4 calls among 10 rows, spread evenly")
}

func TestAlternateRunsABBA(t *testing.T) {
	t.Parallel()
	var order string
	a := func(round int) (time.Duration, error) { order += "a"; return time.Duration(round), nil }
	b := func(round int) (time.Duration, error) { order += "b"; return time.Duration(10 + round), nil }
	times, err := alternate(4, a, b)
	require.NoError(t, err)
	require.Equal(t, "abbaabba", order)
	require.Equal(t, []rounds{{0, 1, 2, 3}, {10, 11, 12, 13}}, times)
	require.Equal(t, 10, share(10, 4, 0)+share(10, 4, 1)+share(10, 4, 2)+share(10, 4, 3), "the shares add up")
}

func TestAlternateGoesForwardAndBack(t *testing.T) {
	t.Parallel()
	var order string
	side := func(name string) func(int) (time.Duration, error) {
		return func(round int) (time.Duration, error) { order += name; return time.Duration(round), nil }
	}
	times, err := alternate(3, side("a"), side("b"), side("c"))
	require.NoError(t, err)
	require.Equal(t, "abccbaabc", order)
	require.Equal(t, []rounds{{0, 1, 2}, {0, 1, 2}, {0, 1, 2}}, times)
}
