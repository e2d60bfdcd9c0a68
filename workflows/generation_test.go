package workflows

import "testing"

// Only this code's build ids name a generation; an older worker's binary
// checksum is generation 0, and a server that records no build id gives
// generation 3: past the version check, short of the local first attempt.
func TestGenerationOf(t *testing.T) {
	for id, want := range map[string]int{
		WorkerBuildID:                      5,
		"outpost-workflows-4":              4,
		"outpost-workflows-2":              2,
		"":                                 3,
		"aa47428fb6ac0ff8a7ae231f5b24c072": 0, // the SDK's default: an older worker
		"outpost-workflows-1":              1,
		"outpost-workflows-":               0,
		"outpost-workflows-2x":             0,
		"my-outpost-workflows-2":           0,
	} {
		if got := generationOf(id); got != want {
			t.Errorf("generationOf(%q) = %d, want %d", id, got, want)
		}
	}
}

// Generation 2 and later skip the version check; generation 4 and later
// make the first attempt a local activity.
func TestGenerationDecisions(t *testing.T) {
	for g, want := range map[int][2]bool{0: {false, false}, 1: {false, false}, 2: {true, false}, 3: {true, false}, 4: {true, true}, 5: {true, true}} {
		if got := versionMarkersRetired(g); got != want[0] {
			t.Errorf("versionMarkersRetired(%d) = %v, want %v", g, got, want[0])
		}
		if got := firstAttemptLocal(g); got != want[1] {
			t.Errorf("firstAttemptLocal(%d) = %v, want %v", g, got, want[1])
		}
	}
}
