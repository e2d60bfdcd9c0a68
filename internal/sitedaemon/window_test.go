package sitedaemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// fillWindow acquires every slot of w, all free, and returns them.
func fillWindow(t *testing.T, w *handOffWindow) []handOffSlot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	slots := make([]handOffSlot, w.size())
	for i := range slots {
		var err error
		slots[i], err = w.acquire(ctx)
		require.NoError(t, err, "slot %d of %d is free", i, len(slots))
	}
	return slots
}

// roundTrips keeps w full for rounds round trips of took each: every slot
// is acknowledged after took and taken again at once, as a sweep over a
// long backlog does.
func roundTrips(t *testing.T, w *handOffWindow, rounds int, took time.Duration) {
	t.Helper()
	for range rounds {
		for _, slot := range fillWindow(t, w) {
			w.release(slot, took, handOffAcked)
		}
	}
}

// Over a long link whose round trip stays at its floor, the window doubles
// each round trip from where it starts, and stops at its bound.
func TestWindowGrowsWhileTheRoundTripStaysAtItsFloor(t *testing.T) {
	t.Parallel()
	w := newHandOffWindow(8, 100)
	roundTrips(t, w, 1, 300*time.Millisecond)
	require.Equal(t, 16, w.size(), "a full window of acks at the floor doubles it")
	roundTrips(t, w, 1, 300*time.Millisecond)
	require.Equal(t, 32, w.size())
	roundTrips(t, w, 10, 300*time.Millisecond)
	require.Equal(t, 100, w.size(), "never over the bound")

	slots := fillWindow(t, w)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := w.acquire(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no slot over the bound")
	for _, slot := range slots {
		w.release(slot, 300*time.Millisecond, handOffAcked)
	}
}

// Round trips far above the floor are central queueing hand-offs: the
// window gives back what it grew, down to where it started, never below.
func TestWindowShrinksToItsStartWhenCentralQueues(t *testing.T) {
	t.Parallel()
	w := newHandOffWindow(8, 256)
	roundTrips(t, w, 3, 10*time.Millisecond)
	require.Equal(t, 64, w.size())
	roundTrips(t, w, 40, 100*time.Millisecond)
	require.Equal(t, 8, w.size(), "queued round trips shrink the window to its start")
}

// On loopback, where eight in flight already make central queue them, the
// window does not grow: it stays where it started.
func TestWindowStaysAtItsStartWhileCentralQueues(t *testing.T) {
	t.Parallel()
	w := newHandOffWindow(8, 256)
	slots := fillWindow(t, w)
	w.release(slots[0], time.Millisecond, handOffAcked) // the floor, before the queue built up
	for _, slot := range slots[1:] {
		w.release(slot, 16*time.Millisecond, handOffAcked)
	}
	roundTrips(t, w, 20, 16*time.Millisecond)
	require.Equal(t, 8, w.size())
}

// A failed hand-off halves the window once for all the hand-offs that were
// in flight with it, and never below its start: a fixed pool of start
// hand-offs is the least a sweep tries.
func TestWindowHalvesOnFailuresDownToItsStart(t *testing.T) {
	t.Parallel()
	w := newHandOffWindow(8, 256)
	roundTrips(t, w, 2, 300*time.Millisecond)
	require.Equal(t, 32, w.size())

	slots := fillWindow(t, w)
	for _, slot := range slots {
		w.release(slot, 0, handOffFailed)
	}
	require.Equal(t, 16, w.size(), "32 failures of one window halve it once")
	for range 5 {
		slots := fillWindow(t, w)
		w.release(slots[0], 0, handOffFailed)
		for _, slot := range slots[1:] {
			w.release(slot, 0, handOffNoSignal)
		}
	}
	require.Equal(t, 8, w.size(), "each window's failure halves it again, down to its start")
}

// Refusals (the item, central's setup) say nothing of the link: the window
// neither grows nor shrinks.
func TestWindowIgnoresRefusals(t *testing.T) {
	t.Parallel()
	w := newHandOffWindow(8, 256)
	for range 3 {
		for _, slot := range fillWindow(t, w) {
			w.release(slot, 0, handOffNoSignal)
		}
	}
	require.Equal(t, 8, w.size())
}

// A trickle of hand-offs, one at a time, says nothing of what more in
// flight would do: the window does not grow on it.
func TestWindowGrowsOnlyWhenUsed(t *testing.T) {
	t.Parallel()
	w := newHandOffWindow(8, 256)
	for range 100 {
		slot, err := w.acquire(context.Background())
		require.NoError(t, err)
		w.release(slot, 300*time.Millisecond, handOffAcked)
	}
	require.Equal(t, 8, w.size())
}

// A bound below the start is the start: a fixed window.
func TestWindowBoundIsAtLeastItsStart(t *testing.T) {
	t.Parallel()
	w := newHandOffWindow(8, 0)
	roundTrips(t, w, 5, 300*time.Millisecond)
	require.Equal(t, 8, w.size())
}

// The window is a gauge of the site's metrics.
func TestWindowIsAMetric(t *testing.T) {
	t.Parallel()
	store, _ := bufferNotifications(t, 0)
	fwd := NewForwarder(store, targets.New(nil, nil), nil, ForwarderOptions{Parallelism: 8, MaxInFlight: 64}, zap.NewNop())
	reg := newMetricsRegistry(store, fwd, time.Now)
	window := func() float64 {
		families, err := reg.Gather()
		require.NoError(t, err)
		byName := map[string]*dto.MetricFamily{}
		for _, f := range families {
			byName[f.GetName()] = f
		}
		return testutil.MetricValue(byName, "outpost_site_handoff_window", nil)
	}
	require.Equal(t, 8.0, window())
	roundTrips(t, fwd.window, 1, 300*time.Millisecond)
	require.Equal(t, 16.0, window())
}

// Central down (Unavailable) or a hand-off cut short by the sweep's stop
// says nothing of central's capacity: the window keeps its size, so a site
// that waited out an outage tries as many rows each sweep as before it. A
// timeout counts against it.
func TestWindowOutcomeOfCentralDown(t *testing.T) {
	require.Equal(t, handOffNoSignal, windowOutcome(serviceerror.NewUnavailable("connection refused")))
	require.Equal(t, handOffNoSignal, windowOutcome(fmt.Errorf("hand off: %w", context.Canceled)))
	require.Equal(t, handOffFailed, windowOutcome(fmt.Errorf("hand off: %w", context.DeadlineExceeded)))
	require.Equal(t, handOffAcked, windowOutcome(nil))
}
