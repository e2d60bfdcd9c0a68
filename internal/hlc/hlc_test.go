package hlc

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

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

// Property: whatever the wall clock reads (steps back, stands still, jumps
// past year 9999 or before 1970) and however full the counter, every next
// timestamp orders after the last, sorts after it as a string, and parses
// back to itself.
func TestNextAlwaysAdvancesAndRoundTrips(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	readings := []int64{-5, 0, 1_700_000_000_000, MaxPhysical, MaxPhysical + 1, math.MaxInt64}
	for run := range 200 {
		last := Timestamp{Physical: rng.Int64N(MaxPhysical), Logical: uint32(rng.Uint64())}
		if run%4 == 0 {
			last.Logical = math.MaxUint32 - uint32(rng.IntN(3))
		}
		for range 50 {
			now := last.Physical + rng.Int64N(2001) - 1000
			if rng.IntN(10) == 0 {
				now = readings[rng.IntN(len(readings))]
			}
			next := Next(last, now)
			require.True(t, last.Before(next), "after %v at %d: %v", last, now, next)
			require.Less(t, last.String(), next.String())
			require.LessOrEqual(t, next.Physical, MaxPhysical+1<<20, "a broken clock does not pin the timestamps")
			parsed, err := Parse(next.String())
			require.NoError(t, err)
			require.Equal(t, next, parsed)
			last = next
		}
	}
}

func TestNextBorrowsAMillisecondWhenTheCounterIsFull(t *testing.T) {
	t.Parallel()
	full := Timestamp{Physical: 1000, Logical: math.MaxUint32}
	require.Equal(t, Timestamp{Physical: 1001}, Next(full, 900))
	require.Equal(t, Timestamp{Physical: MaxPhysical}, Next(Timestamp{Physical: 5}, math.MaxInt64), "clamped, not adopted")
	_, err := Parse("1234567890123456789-1")
	require.NoError(t, err, "wider than 15 digits still parses")
	for _, bad := range []string{"", "12", "x-1", "-5-1", "1-99999999999"} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
}

func TestReceiveOrdersAfterBothClocks(t *testing.T) {
	local := Timestamp{Physical: 1000, Logical: 4}
	remote := Timestamp{Physical: 1500, Logical: 7}
	got, err := Receive(local, remote, 1200, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !remote.Before(got) || !local.Before(got) {
		t.Fatalf("Receive(%s, %s) = %s: not after both", local, remote, got)
	}
	if want := (Timestamp{Physical: 1500, Logical: 8}); got != want {
		t.Fatalf("Receive = %s, want %s (the remote's millisecond, next counter)", got, want)
	}
	// A remote behind the local clock changes nothing but the next tick.
	got, err = Receive(Timestamp{Physical: 2000}, remote, 2000, time.Second)
	if err != nil || got != (Timestamp{Physical: 2000, Logical: 1}) {
		t.Fatalf("Receive of an older remote = %s, %v", got, err)
	}
}

func TestReceiveRefusesARemoteTooFarAhead(t *testing.T) {
	local := Timestamp{Physical: 1000}
	remote := Timestamp{Physical: 1000 + 501}
	got, err := Receive(local, remote, 1000, 500*time.Millisecond)
	if !errors.Is(err, ErrTooFarAhead) {
		t.Fatalf("Receive 501 ms ahead with a 500 ms offset: err = %v, want ErrTooFarAhead", err)
	}
	if got != local {
		t.Fatalf("a refused remote moved the clock to %s", got)
	}
	if _, err := Receive(local, Timestamp{Physical: 1500}, 1000, 500*time.Millisecond); err != nil {
		t.Fatalf("a remote exactly max offset ahead is accepted: %v", err)
	}
}

// The link hashes this text, so AppendText must write exactly the fixed
// widths String always wrote, for every value including overlong ones.
func TestAppendTextWritesFixedWidths(t *testing.T) {
	for _, ts := range []Timestamp{
		{}, {Physical: 1, Logical: 2}, {Physical: 1_763_900_000_123, Logical: 99},
		{Physical: MaxPhysical, Logical: math.MaxUint32}, {Physical: math.MaxInt64, Logical: 7}, {Physical: -5, Logical: 1},
	} {
		want := fmt.Sprintf("%015d-%010d", ts.Physical, ts.Logical)
		if got := string(ts.AppendText([]byte("x"))); got != "x"+want {
			t.Errorf("AppendText(%d, %d) = %q, want %q", ts.Physical, ts.Logical, got, "x"+want)
		}
	}
}
