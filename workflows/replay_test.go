package workflows_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/notification"
	"github.com/outpost-dev/outpost/workflows"
)

// Histories recorded from the real dev server (internal/e2e with
// OUTPOST_RECORD_HISTORY=1) must replay on today's code: a change that breaks
// determinism for running workflows fails here.
func TestReplayRecordedHistories(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			replayer := worker.NewWorkflowReplayer()
			notify := notification.Workflow{AttemptTimeout: time.Minute}
			replayer.RegisterWorkflowWithOptions(notify.Run, workflow.RegisterOptions{Name: contract.WorkflowNotification})
			replayer.RegisterWorkflowWithOptions(notify.RunStarted, workflow.RegisterOptions{Name: contract.WorkflowNotificationStarted})
			replayer.RegisterWorkflowWithOptions(workflows.CachedCallWorkflow, workflow.RegisterOptions{Name: contract.WorkflowCachedCall})
			replayer.RegisterWorkflowWithOptions(workflows.CachedCallWorkflowStarted, workflow.RegisterOptions{Name: contract.WorkflowCachedCallStarted})
			replayer.RegisterWorkflowWithOptions(workflows.TelemetryIngestWorkflow, workflow.RegisterOptions{Name: contract.WorkflowTelemetryIngest})
			require.NoError(t, replayer.ReplayWorkflowHistoryFromJSONFile(nil, file))
		})
	}
}
