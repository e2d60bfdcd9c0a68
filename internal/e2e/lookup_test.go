package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// Temporal keeps a closed workflow only for the namespace's retention;
// central keeps the row for a year. A notification whose workflow is gone
// (a row with no workflow here) is answered from central's row; an id
// central never had is 404.
func TestStatusOutlivesTheWorkflow(t *testing.T) {
	s := newStack(t, nil)
	ctx := context.Background()
	enqueued := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Millisecond)
	delivered := enqueued.Add(3 * time.Second)
	row := centralstore.Notification{
		NotificationID: uuid.NewString(), Type: contract.NotificationTypeEmail, ListName: "ops",
		Subject: "two days old", Status: contract.StatusDelivered, RetryCount: 1,
		ResolvedTargets: []string{"ops@example.com"}, SourceSiteID: "plant-1",
		SiteEnqueuedAt: enqueued, CreatedAt: enqueued, LastAttemptAt: &delivered, DeliveredAt: &delivered, TerminalAt: &delivered,
	}
	_, _, err := s.centralStore().InsertNotification(ctx, row)
	require.NoError(t, err)

	st, code := s.status(row.NotificationID)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, row.NotificationID, st.NotificationID)
	require.Equal(t, contract.StatusDelivered, st.Status)
	require.Equal(t, 1, st.RetryCount)
	require.Equal(t, row.ResolvedTargets, st.ResolvedTargets)
	require.NotNil(t, st.DeliveredAt)
	require.WithinDuration(t, delivered, *st.DeliveredAt, time.Millisecond)
	require.WithinDuration(t, enqueued, st.SiteEnqueuedAt, time.Millisecond)

	unknown := uuid.NewString()
	for range 5 {
		_, code = s.status(unknown)
		require.Equal(t, http.StatusNotFound, code, "an id central never had")
	}
	resp, err := s.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = %q", contract.LookupNotificationWorkflowID(unknown)),
	})
	require.NoError(t, err)
	require.Len(t, resp.Executions, 1, "polling an unknown id asks central once, not once per request")
}
