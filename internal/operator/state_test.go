package operator

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/outpost-dev/outpost/contract"
)

// A workflow terminated or timed out while its operation was not final
// leaves a stale state behind: it reads Discarded. Any other close, or a
// final state, stands.
func TestEndedUnfinished(t *testing.T) {
	t.Parallel()
	parked := func() State {
		return State{Notification: &contract.NotificationState{Status: contract.StatusParked, LastError: "550 mailbox unavailable"}}
	}
	for _, status := range []enums.WorkflowExecutionStatus{enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT} {
		st := EndedUnfinished(parked(), status)
		require.Equal(t, contract.StatusDiscarded, st.Notification.Status, status.String())
		require.Contains(t, st.Notification.LastError, "before it finished")
		require.Contains(t, st.Notification.LastError, "last error: 550 mailbox unavailable")
	}
	for _, status := range []enums.WorkflowExecutionStatus{enums.WORKFLOW_EXECUTION_STATUS_RUNNING, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		enums.WORKFLOW_EXECUTION_STATUS_CANCELED, enums.WORKFLOW_EXECUTION_STATUS_FAILED} {
		require.Equal(t, contract.StatusParked, EndedUnfinished(parked(), status).Notification.Status, status.String())
	}
	call := State{Call: &contract.CachedCallState{TrackedOperation: contract.TrackedOperation{Status: contract.StatusRetrying}}}
	require.Equal(t, contract.StatusDiscarded, EndedUnfinished(call, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED).Call.Status)
	delivered := State{Call: &contract.CachedCallState{TrackedOperation: contract.TrackedOperation{Status: contract.StatusDelivered}}}
	require.Equal(t, contract.StatusDelivered, EndedUnfinished(delivered, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED).Call.Status)
}
