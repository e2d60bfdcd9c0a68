package sitedaemon

import (
	"context"
	"sync"
	"time"
)

// Thresholds of the hand-off window, as multiples of the round-trip floor.
const (
	// growWithin: a round trip up to this many floors is the link's own,
	// and central is keeping up.
	growWithin = 2
	// queuedPast: a round trip over this many floors waited at central.
	queuedPast = 3
)

// handOffWindow is how many hand-offs the forwarder keeps in flight, a
// congestion window over the round trip to central. A hand-off's answer
// takes at least one round trip, so a fixed count caps the drain at count
// ÷ round trip: 8 that keep central busy on a LAN leave it idle behind a
// satellite hop. The SDK's one HTTP/2 connection carries any number of
// hand-offs at once; what bounds them is central's work, which shows as
// round trips above the link's own.
//
// The window starts at start. Each acknowledged hand-off during which the
// window was full adds one (the window doubles each round trip) while its
// round trip stays within growWithin floors, the floor being the least
// round trip seen since central was last unreachable. Round trips over
// queuedPast floors shrink it toward the window that would bring them back
// within growWithin (about two thirds of the way each window's worth of
// hand-offs), down to start: central is queueing them, and more in flight
// would only wait longer. A failed hand-off halves the window, once per
// window's worth, down to start: below it a site whose central timed out
// through an outage would try a row or two a sweep, each reporting its
// failure, where a fixed pool of start tried start. Only hand-offs
// started since the last halving grow it. It never exceeds max.
type handOffWindow struct {
	start, max int
	// freed wakes acquire when a slot is released.
	freed chan struct{}

	mu       sync.Mutex
	limit    float64
	inFlight int
	// floor is the least round trip since forgetFloor; 0 before the first.
	floor time.Duration
	// epoch counts the halvings: a failure of a hand-off started before
	// the last halving does not halve again.
	epoch int
	// fills counts the hand-offs that took the window's last free slot.
	fills int
}

// handOffSlot is one hand-off's place in the window.
type handOffSlot struct {
	epoch int
	// fills is the window's fills when it started; filled says it took
	// the last free slot. A hand-off during which the window was full
	// tells whether more in flight would go faster; one in a trickle
	// does not.
	fills  int
	filled bool
}

// handOffOutcome is what a hand-off says about the link and central.
type handOffOutcome int

const (
	// handOffAcked: central took it; its round trip is a sample.
	handOffAcked handOffOutcome = iota
	// handOffFailed: it failed for want of an answer or of capacity.
	handOffFailed
	// handOffNoSignal: central answered about the item or its own setup
	// (refused, not ready): nothing about the link.
	handOffNoSignal
)

// newHandOffWindow returns a window of start slots that may grow to bound
// (at least start).
func newHandOffWindow(start, bound int) *handOffWindow {
	start = max(start, 1)
	return &handOffWindow{start: start, max: max(bound, start), limit: float64(start), freed: make(chan struct{}, 1)}
}

// acquire waits for a free slot, or for ctx to end. One goroutine
// acquires (the sweep's feed); any may release.
func (w *handOffWindow) acquire(ctx context.Context) (handOffSlot, error) {
	for {
		w.mu.Lock()
		if w.inFlight < int(w.limit) {
			w.inFlight++
			filled := w.inFlight >= int(w.limit)
			if filled {
				w.fills++
			}
			slot := handOffSlot{epoch: w.epoch, fills: w.fills, filled: filled}
			w.mu.Unlock()
			return slot, nil
		}
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return handOffSlot{}, ctx.Err()
		case <-w.freed:
		}
	}
}

// release frees slot after a hand-off of round trip took ended with
// outcome, and adapts the window to it.
func (w *handOffWindow) release(slot handOffSlot, took time.Duration, outcome handOffOutcome) {
	w.mu.Lock()
	w.inFlight--
	switch outcome {
	case handOffAcked:
		w.sample(slot, took)
	case handOffFailed:
		w.halve(slot)
	}
	w.mu.Unlock()
	select {
	case w.freed <- struct{}{}:
	default:
	}
}

// sample adapts the window to an acknowledged hand-off's round trip. Only
// hand-offs started since the last halving grow it: those in flight then
// answer for a window that was too big.
func (w *handOffWindow) sample(slot handOffSlot, took time.Duration) {
	if w.floor == 0 || took < w.floor {
		w.floor = took
	}
	grows := slot.epoch == w.epoch
	full := slot.filled || slot.fills != w.fills
	switch {
	case grows && full && took <= growWithin*w.floor:
		w.limit = min(w.limit+1, float64(w.max))
	case took > queuedPast*w.floor && w.limit > float64(w.start):
		// Round trips shrink in proportion to the window while central
		// queues: aim for the window whose round trip is within
		// growWithin again, a window's worth of acks to get most of the
		// way.
		target := w.limit * float64(growWithin*w.floor) / float64(took)
		w.limit = max(w.limit-(w.limit-target)/w.limit, float64(w.start))
	}
}

// halve halves the window after a failure, once per window's worth.
func (w *handOffWindow) halve(slot handOffSlot) {
	if slot.epoch != w.epoch {
		return
	}
	w.epoch++
	w.limit = max(w.limit/2, float64(w.start))
}

// forgetFloor starts the floor afresh: after central was unreachable the
// link may be another (a failover from cable to satellite).
func (w *handOffWindow) forgetFloor() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.floor = 0
}

// size is the window now.
func (w *handOffWindow) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return int(w.limit)
}
