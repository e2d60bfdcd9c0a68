// Package temporalcentral answers the site SDK's Status for notifications
// already handed to central, through a Temporal client: the site daemon's
// Client and any script that wants central's answer set it as
// site.Options.Central. It is apart from package site so that a script
// that only buffers work links no Temporal client.
package temporalcentral

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/operator"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// New is the site.Central that asks central through tc.
func New(tc client.Client) site.Central { return central{client: tc} }

// NewInRegion is the site.Central that asks region's central through tc:
// a notification's lookup runs on the region's task queue, owned by it.
func NewInRegion(tc client.Client, region contract.Region) site.Central {
	return central{client: tc, region: region}
}

type central struct {
	client client.Client
	region contract.Region
}

// NotificationState asks the notification's workflow for its state. A workflow
// closed other than cleanly (terminated, timed out, cancelled, failed)
// rejects the query: its last state may be stale (a terminated Parked one
// stays Parked in its history), so central's row answers, and a workflow
// terminated before it finished answers Discarded (EndedUnfinished).
func (c central) NotificationState(ctx context.Context, id string) (contract.NotificationState, error) {
	tc := c.client
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	wid := contract.NotificationWorkflowID(id)
	resp, err := tc.QueryWorkflowWithOptions(ctx, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: wid, QueryType: contract.QueryStatus,
		QueryRejectCondition: enums.QUERY_REJECT_CONDITION_NOT_COMPLETED_CLEANLY,
	})
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return lookupCentral(ctx, tc, c.region, id)
	case err != nil:
		return contract.NotificationState{}, &site.UnreachableError{Err: fmt.Errorf("status query of %s: %w", wid, err)}
	case resp.QueryRejected != nil:
		row, err := lookupCentral(ctx, tc, c.region, id)
		if err != nil {
			return row, err
		}
		return *operator.EndedUnfinished(operator.State{Notification: &row}, resp.QueryRejected.GetStatus()).Notification, nil
	}
	st, err := operator.DecodeState(wid, resp.QueryResult.Get)
	if err != nil {
		return contract.NotificationState{}, fmt.Errorf("status query of %s: decode: %w", wid, err)
	}
	return *st.Notification, nil
}

// lookupCentral reads the notification's central row through
// LookupNotificationWorkflow: the answer once its workflow has passed the
// namespace's retention, and the way to tell an id central never had.
func lookupCentral(ctx context.Context, tc client.Client, region contract.Region, id string) (contract.NotificationState, error) {
	opts := client.StartWorkflowOptions{
		ID:                       contract.LookupNotificationWorkflowID(id),
		TaskQueue:                region.TaskQueue(),
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            "Status of notification " + id,
	}
	if region.Name != "" {
		opts.TypedSearchAttributes = temporal.NewSearchAttributes(temporalcontract.AttrRegion.ValueSet(region.Name))
	}
	run, err := tc.ExecuteWorkflow(ctx, opts, contract.WorkflowLookupNotification, id)
	if err != nil {
		return contract.NotificationState{}, &site.UnreachableError{Err: err}
	}
	var state contract.NotificationState
	err = run.Get(ctx, &state)
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr) && appErr.Type() == contract.ErrTypeNotFound:
		return contract.NotificationState{}, fmt.Errorf("notification %s: %w", id, site.ErrNotFound)
	case err != nil:
		return contract.NotificationState{}, &site.UnreachableError{Err: fmt.Errorf("read central's row of %s: %w", id, err)}
	}
	return state, nil
}
