package site

import (
	"sync"
	"time"
)

// unknownIDs remembers for a while the ids central said it never had, so a
// client polling an unknown id does not start a lookup workflow on central
// every time. An id is created with its buffer row, which Status reads
// first, so an id central never had does not become known later.
type unknownIDs struct {
	mu      sync.Mutex
	forgets map[string]time.Time // id → when it is forgotten
	now     func() time.Time
}

const (
	unknownTTL = time.Minute
	unknownMax = 10_000 // bounds memory: an attacker may try any number of ids
)

func newUnknownIDs(now func() time.Time) *unknownIDs {
	return &unknownIDs{forgets: map[string]time.Time{}, now: now}
}

// has reports whether id was found unknown less than unknownTTL ago.
func (u *unknownIDs) has(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	at, ok := u.forgets[id]
	return ok && u.now().Before(at)
}

// add remembers id as unknown; when full, expired ids go first, then all.
func (u *unknownIDs) add(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.now()
	if len(u.forgets) >= unknownMax {
		for k, at := range u.forgets {
			if !now.Before(at) {
				delete(u.forgets, k)
			}
		}
		if len(u.forgets) >= unknownMax {
			clear(u.forgets)
		}
	}
	u.forgets[id] = now.Add(unknownTTL)
}
