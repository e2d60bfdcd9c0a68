package workflows_test

import (
	"os/exec"
	"strings"
	"testing"
)

// workflowcheck (Temporal's static checker) finds non-deterministic calls —
// time.Now, goroutines, map ranges, I/O — reachable from a workflow. It is
// pinned as a Go tool in its own module, dev/workflowcheck, built from the
// Go module proxy on first use (`go tool -n` builds it and prints its path).
// It checks these workflows, the building blocks they share
// (workflows/operation) and the notification's workflow, which lives beside
// its activities in package notification.
func TestWorkflowsAreDeterministic(t *testing.T) {
	// Only stdout is the path: on a fresh module cache stderr also says
	// "go: downloading …", which must not end up in the command name.
	var stderr strings.Builder
	build := exec.Command("go", "-C", "../dev/workflowcheck", "tool", "-n", "workflowcheck")
	build.Stderr = &stderr
	path, err := build.Output()
	if err != nil {
		t.Fatalf("build workflowcheck (dev/workflowcheck): %v\n%s", err, stderr.String())
	}
	out, err := exec.Command(strings.TrimSpace(string(path)), "./...", "../notification").CombinedOutput()
	if err != nil {
		t.Fatalf("workflowcheck found non-deterministic workflow code (or could not run): %v\n%s", err, out)
	}
}
