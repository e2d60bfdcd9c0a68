// Package operator is what every operator tool needs of Outpost's
// workflows: find an operation by id (Describe), tell its story (StoryOf),
// read its state by the status query or its result (QueryState, StateOf),
// list the parked ones (Filter, ListParked, AddLastErrors) and retry or
// discard one or many (Resolve, Signal). The outpost CLI, the outbox page
// and the site SDK's status lookup use it; they keep only their flags,
// forms and printing.
package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/outpost-dev/outpost/contract"
)

// State is the answer of the status query (or the workflow's result),
// decoded by kind: NotificationState for notifications, CachedCallState
// for calls and writes. Exactly one field is set.
type State struct {
	Notification *contract.NotificationState
	Call         *contract.CachedCallState
}

// DecodeState decodes a status answer of the workflow workflowID with get
// (an EncodedValue's Get or a WorkflowRun's Get).
func DecodeState(workflowID string, get func(any) error) (State, error) {
	if strings.HasPrefix(workflowID, contract.NotificationWorkflowID("")) {
		var n contract.NotificationState
		if err := get(&n); err != nil {
			return State{}, err
		}
		return State{Notification: &n}, nil
	}
	var c contract.CachedCallState
	if err := get(&c); err != nil {
		return State{}, err
	}
	return State{Call: &c}, nil
}

// Querier is the part of a Temporal client QueryState uses.
type Querier interface {
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
}

// QueryTimeout bounds one status query: with no central worker polling,
// a query waits until its deadline.
const QueryTimeout = 10 * time.Second

// QueryState asks a workflow's status query (runID "" for the latest run).
func QueryState(ctx context.Context, tc Querier, workflowID, runID string) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	v, err := tc.QueryWorkflow(ctx, workflowID, runID, contract.QueryStatus)
	if err != nil {
		return State{}, fmt.Errorf("status query of %s: %w", workflowID, err)
	}
	st, err := DecodeState(workflowID, v.Get)
	if err != nil {
		return State{}, fmt.Errorf("status query of %s: decode: %w", workflowID, err)
	}
	return st, nil
}

// EndedUnfinished is st for an operation whose workflow ended with status
// before the operation finished: terminated (Web UI Terminate, `temporal
// workflow terminate`) or timed out. Such a workflow runs no more code, yet
// its status query keeps answering the last state it had (Parked, say), and
// nothing will ever deliver it: it is Discarded, as central's reconciliation
// records it. Any other status, or a state already final, is returned as is.
func EndedUnfinished(st State, status enums.WorkflowExecutionStatus) State {
	if status != enums.WORKFLOW_EXECUTION_STATUS_TERMINATED && status != enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT {
		return st
	}
	reason := fmt.Sprintf("its workflow was %s before it finished, so it is discarded (reconciliation records it on central)",
		strings.ToLower(status.String()))
	switch {
	case st.Notification != nil && !st.Notification.Status.Terminal():
		n := *st.Notification
		n.Status, n.NextAttemptAt, n.LastError = contract.StatusDiscarded, nil, withLastError(reason, n.LastError)
		return State{Notification: &n}
	case st.Call != nil && !st.Call.Status.Terminal():
		c := *st.Call
		c.Status, c.NextAttemptAt, c.LastError = contract.StatusDiscarded, nil, withLastError(reason, c.LastError)
		return State{Call: &c}
	}
	return st
}

func withLastError(reason, last string) string {
	if last == "" {
		return reason
	}
	return reason + "; last error: " + last
}
