package outbox

import (
	"sync"
	"time"
)

// Sign-in backoff: the first freeFailures wrong passwords for a user name,
// or from an address, cost nothing; each one after waits twice as long as
// the last, from firstWait up to maxWait. A record is forgotten
// forgetAfter after its last failure. bcrypt alone makes a guess cost tens
// of milliseconds; this makes a million guesses cost years, while a person
// who mistyped a few times never notices it.
const (
	freeFailures = 5
	firstWait    = time.Second
	maxWait      = 5 * time.Minute
	forgetAfter  = 15 * time.Minute
	// maxTracked bounds the records kept, so that guesses under a million
	// names cannot grow the map without end; past it the oldest goes.
	maxTracked = 10_000
)

// signInThrottle counts failed sign-ins per key ("user ana", "address
// 192.0.2.1") and says how long a key must wait before its next attempt.
type signInThrottle struct {
	now func() time.Time

	mu       sync.Mutex
	failures map[string]failureRecord
}

type failureRecord struct {
	count int
	last  time.Time
}

func newSignInThrottle(now func() time.Time) *signInThrottle {
	return &signInThrottle{now: now, failures: make(map[string]failureRecord)}
}

// wait is how long the longest-waiting of keys must still wait; 0: none.
func (t *signInThrottle) wait(keys ...string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var longest time.Duration
	for _, k := range keys {
		if r, ok := t.failures[k]; ok {
			longest = max(longest, r.last.Add(backoff(r.count)).Sub(now))
		}
	}
	return longest
}

// backoff is the wait after count failures in a row.
func backoff(count int) time.Duration {
	if count < freeFailures {
		return 0
	}
	if shift := count - freeFailures; shift < 20 { // 2^20 s is far past maxWait
		return min(firstWait<<shift, maxWait)
	}
	return maxWait
}

// fail records a failed attempt under each of keys and returns the first
// key's failures in a row.
func (t *signInThrottle) fail(keys ...string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, k := range keys {
		r, ok := t.failures[k]
		if !ok || now.Sub(r.last) > forgetAfter {
			r = failureRecord{}
			t.makeRoom()
		}
		r.count++
		r.last = now
		t.failures[k] = r
	}
	return t.failures[keys[0]].count
}

// succeed forgets key's failures.
func (t *signInThrottle) succeed(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.failures, key)
}

// makeRoom keeps the records under maxTracked: it drops the forgotten
// ones, and if none is, the oldest.
func (t *signInThrottle) makeRoom() {
	if len(t.failures) < maxTracked {
		return
	}
	now := t.now()
	oldestKey, oldest := "", now
	for k, r := range t.failures {
		if now.Sub(r.last) > forgetAfter {
			delete(t.failures, k)
		} else if oldestKey == "" || r.last.Before(oldest) {
			oldestKey, oldest = k, r.last
		}
	}
	if len(t.failures) >= maxTracked {
		delete(t.failures, oldestKey)
	}
}
