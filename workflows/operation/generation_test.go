package operation

import "testing"

// Only this code's build ids name a generation; an older worker's binary
// checksum is generation 0, and a server that records no build id gives
// generation 3: past the version check, short of the local first attempt.
func TestGenerationOf(t *testing.T) {
	for id, want := range map[string]int{
		WorkerBuildID:                      6,
		"outpost-workflows-5":              5,
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
