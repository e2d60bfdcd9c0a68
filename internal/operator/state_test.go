package operator

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
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

// A workflow that completed while its OutpostStatus read Pending was
// delivered without trouble (central no longer upserts that Delivered);
// any other pair reads as its attribute says.
func TestShownStatus(t *testing.T) {
	attrs := func(status contract.Status) *commonpb.SearchAttributes {
		p, err := converter.GetDefaultDataConverter().ToPayload(string(status))
		require.NoError(t, err)
		return &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{temporalcontract.AttrStatus.GetName(): p}}
	}
	for _, tc := range []struct {
		attr   contract.Status
		status enums.WorkflowExecutionStatus
		want   contract.Status
	}{
		{contract.StatusPending, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, contract.StatusDelivered},
		{contract.StatusPending, enums.WORKFLOW_EXECUTION_STATUS_RUNNING, contract.StatusPending},
		{contract.StatusPending, enums.WORKFLOW_EXECUTION_STATUS_TERMINATED, contract.StatusPending},
		{contract.StatusDelivered, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, contract.StatusDelivered},
		{contract.StatusDiscarded, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, contract.StatusDiscarded},
	} {
		got := shownStatus(Execution{Status: tc.status, SearchAttributes: attrs(tc.attr)})
		require.Equal(t, tc.want, got, "%s while %s", tc.attr, tc.status)
	}
}
