package workflows

import "testing"

// Only this code's build ids of generation 2 or later, or none at all, skip
// the version check; an older worker's binary checksum keeps it.
func TestRetiresVersionMarkers(t *testing.T) {
	for id, want := range map[string]bool{
		WorkerBuildID:                      true,
		"outpost-workflows-2":              true,
		"":                                 true,
		"aa47428fb6ac0ff8a7ae231f5b24c072": false, // the SDK's default: an older worker
		"outpost-workflows-1":              false,
		"outpost-workflows-":               false,
		"outpost-workflows-2x":             false,
		"my-outpost-workflows-2":           false,
	} {
		if got := retiresVersionMarkers(id); got != want {
			t.Errorf("retiresVersionMarkers(%q) = %v, want %v", id, got, want)
		}
	}
}
