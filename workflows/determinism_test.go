package workflows_test

import (
	"os/exec"
	"testing"
)

// workflowcheck (Temporal's static checker) finds non-deterministic calls —
// time.Now, goroutines, map ranges, I/O — reachable from a workflow. Pinned
// here; fetched from the Go module proxy on first use.
const workflowcheck = "go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0"

func TestWorkflowsAreDeterministic(t *testing.T) {
	out, err := exec.Command("go", "run", workflowcheck, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("workflowcheck found non-deterministic workflow code (or could not run): %v\n%s", err, out)
	}
}
