package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// SettleActivities find operations whose workflows were terminated before
// they finished. A terminated workflow runs no code: without this its
// central row would stay Parked (and counted) and a call's site row and
// buffered payload would stay forever.
type SettleActivities struct {
	Client client.Client
	Store  *centralstore.Store
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// SettleTerminated discards, on central, the notifications of siteID whose
// workflows were terminated while Pending, Retrying or Parked, and returns
// them with the calls in the same case, which the workflow discards on the
// site. An operation already settled is left out.
func (a *SettleActivities) SettleTerminated(ctx context.Context, siteID string) (contract.SettleTerminatedResult, error) {
	var out contract.SettleTerminatedResult
	status := temporalcontract.AttrStatus.GetName()
	query := fmt.Sprintf(`ExecutionStatus="Terminated" AND %s=%q AND %s IN (%q, %q, %q)`,
		temporalcontract.AttrSite.GetName(), siteID, status, contract.StatusPending, contract.StatusRetrying, contract.StatusParked)
	var token []byte
	for {
		resp, err := a.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return out, fmt.Errorf("list terminated workflows of site %s: %w", siteID, err)
		}
		for _, info := range resp.GetExecutions() {
			wid := info.GetExecution().GetWorkflowId()
			if id, ok := contract.NotificationIDFromWorkflowID(wid); ok {
				settled, err := a.discardNotification(ctx, id)
				if err != nil {
					return out, err
				}
				if settled {
					out.Notifications = append(out.Notifications, id)
				}
			} else if id, ok := contract.CachedCallIDFromWorkflowID(wid); ok && a.callOpen(ctx, id) {
				out.Calls = append(out.Calls, id)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// discardNotification ends a terminated notification's row Discarded, with
// its audit event; false when the row is already final or unknown.
func (a *SettleActivities) discardNotification(ctx context.Context, id string) (bool, error) {
	row, err := a.Store.GetNotification(ctx, id)
	if errors.Is(err, centralstore.ErrNotFound) {
		return false, nil
	}
	if err != nil || row.Status.Terminal() {
		return false, err
	}
	upd := contract.NotificationUpdate{
		NotificationID: id, Status: contract.StatusDiscarded, RetryCount: row.RetryCount,
		LastError:     "workflow terminated before it finished, discarded by reconciliation; last error: " + row.LastError,
		LastAttemptAt: row.LastAttemptAt, SiteID: row.SourceSiteID, At: utcNow(a.Now),
	}
	err = a.Store.UpdateNotificationStatus(ctx, upd, audit.NotificationUpdatedRows(upd)...)
	if errors.Is(err, centralstore.ErrTerminal) {
		return false, nil
	}
	return err == nil, err
}

// callOpen reports whether central's mirror of a call is not final yet (or
// missing): the site still has to discard it.
func (a *SettleActivities) callOpen(ctx context.Context, id string) bool {
	row, err := a.Store.GetSiteCall(ctx, id)
	return err != nil || !row.Status.Terminal()
}
