package freeport

import (
	"testing"
)

// A reserved port is below the ceiling asked for, and no other reservation
// gets it until it is released.
func TestReserveKeepsThePortUntilReleased(t *testing.T) {
	const max = 10100 // a hundred ports: a repeat would show within 200 picks
	held, release, err := Reserve(max)
	if err != nil {
		t.Fatal(err)
	}
	if held < 10000 || held >= max {
		t.Fatalf("port %d outside 10000-%d", held, max-1)
	}
	var releases []func()
	defer func() {
		for _, r := range releases {
			r()
		}
	}()
	for range 99 {
		port, r, err := Reserve(max)
		if err != nil {
			break // every free port of the hundred is taken now
		}
		releases = append(releases, r)
		if port == held {
			t.Fatalf("port %d reserved twice", port)
		}
	}
	release()
}
