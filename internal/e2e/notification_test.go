package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/workflows"
)

// Every notification submitted through the site API arrives once and ends
// Delivered in the central table and in the status API.
func TestNotificationsDeliveredExactlyOnce(t *testing.T) {
	s := newStack(t, nil)
	const n = 200
	ids := make([]string, n)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				ids[i] = s.notify("ops", fmt.Sprintf("alarm %d", i))
			}
		}()
	}
	wg.Wait()

	require.Eventually(t, func() bool { return len(s.received()) == n }, 2*time.Minute, 200*time.Millisecond)
	s.waitStatus(workflows.StatusDelivered, time.Minute, ids...)
	received := s.received()
	store := s.centralStore()
	for _, id := range ids {
		require.Equal(t, 1, received[id], "emails for %s", id)
		row, err := store.GetNotification(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, workflows.StatusDelivered, row.Status)
		require.Equal(t, []string{"ops@example.com", "oncall@example.com"}, row.ResolvedTargets)
		require.Equal(t, "plant-1", row.SourceSiteID)
		require.Equal(t, "node-a", row.SourceNode)
		require.Equal(t, "e2e", row.SourceScript)
		require.NotNil(t, row.DeliveredAt)
	}
	depth, err := s.daemon.Client.BufferDepth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth, "every acknowledged row leaves the site buffer")
}

// SMTP down: Retrying at the fixed interval, Parked after max retries; retry
// after SMTP is back delivers; discard ends Discarded.
func TestSMTPDownRetryParkRetryDiscard(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Central.SMTP.RetryInterval = 2 * time.Second })
	s.stopSMTP()
	first := s.notify("ops", "first while smtp is down")
	second := s.notify("ops", "second while smtp is down")

	s.waitStatus(workflows.StatusRetrying, 30*time.Second, first)
	st, _ := s.status(first)
	require.Contains(t, st.LastError, "connection refused")
	require.NotNil(t, st.NextAttemptAt)

	s.waitStatus(workflows.StatusParked, time.Minute, first, second)
	st, _ = s.status(first)
	require.Equal(t, 2, st.RetryCount)
	require.Contains(t, st.LastError, "retries exhausted (2)")
	// Attempts 0 s, 2 s, 4 s: fixed interval, first attempt to parking ≈ 2 intervals.
	require.NotNil(t, st.LastAttemptAt)
	row, err := s.centralStore().GetNotification(context.Background(), first)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusParked, row.Status)

	s.startSMTP()
	s.signal(first, workflows.SignalRetry, workflows.OperatorAction{Operator: "ana", Reason: "relay back"})
	s.signal(second, workflows.SignalDiscard, workflows.OperatorAction{})
	s.waitStatus(workflows.StatusDelivered, 30*time.Second, first)
	s.waitStatus(workflows.StatusDiscarded, 30*time.Second, second)

	received := s.received()
	require.Equal(t, 1, received[first])
	require.Zero(t, received[second])
	st, _ = s.status(first)
	require.Equal(t, 0, st.RetryCount, "retry resets the retry count")
	require.Equal(t, "ana", st.LastOperatorAction.Operator)
	row, err = s.centralStore().GetNotification(context.Background(), second)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusDiscarded, row.Status, "a discarded row is kept")
	s.recordHistory(workflows.NotificationWorkflowID(first), "notification_retrying_parked_retried_delivered.json")
	s.recordHistory(workflows.NotificationWorkflowID(second), "notification_parked_discarded.json")
}

// A permanent SMTP failure (5xx) and an unknown or empty list park at once.
func TestPermanentFailuresParkAtOnce(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Central.SMTP.MaxRetries = 5 })
	unknown := s.notify("no-such-list", "to nobody")
	empty := s.notify("empty", "to an empty list")
	s.waitStatus(workflows.StatusParked, 30*time.Second, unknown, empty)
	st, _ := s.status(unknown)
	require.Contains(t, st.LastError, `notification list "no-such-list" is not defined`)
	require.Zero(t, st.RetryCount)
	st, _ = s.status(empty)
	require.Contains(t, st.LastError, "has no recipients")

	s.sinks[0].Reject(550, "mailbox unavailable")
	rejected := s.notify("ops", "rejected by the relay")
	s.waitStatus(workflows.StatusParked, 30*time.Second, rejected)
	st, _ = s.status(rejected)
	require.Contains(t, st.LastError, "550")
	require.Zero(t, st.RetryCount)
}

// Temporal down while notifications are submitted: the site accepts them all,
// and when Temporal is back they are delivered, none lost, none twice.
func TestTemporalDownNothingLost(t *testing.T) {
	s := newStack(t, nil)
	before := s.notify("ops", "before the outage")
	s.waitStatus(workflows.StatusDelivered, 30*time.Second, before)

	s.stopTemporal()
	const n = 50
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.notify("ops", fmt.Sprintf("during the outage %d", i))
	}
	// Every row is answered locally, and its hand-off fails and is retried.
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if st, _ := s.status(id); st.RetryCount < 2 {
				return false
			}
		}
		return true
	}, time.Minute, 200*time.Millisecond, "hand-offs retried at the forward interval while central is down")
	for _, id := range ids {
		st, code := s.status(id)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, workflows.StatusForwarding, st.Status)
		require.Contains(t, st.LastError, "central unreachable")
	}
	_, code := s.status(before)
	require.Equal(t, http.StatusServiceUnavailable, code, "central's answer is unavailable during the outage")

	s.startTemporal()
	s.waitStatus(workflows.StatusDelivered, 2*time.Minute, ids...)
	received := s.received()
	for _, id := range append(ids, before) {
		require.Equal(t, 1, received[id], "emails for %s", id)
	}
}

// A duplicate submit of the same id never sends a second email, whether the
// workflow is still running or already closed.
func TestDuplicateSubmitSendsOnce(t *testing.T) {
	s := newStack(t, nil)
	sub := workflows.NotificationSubmission{
		NotificationID: uuid.NewString(), ListName: "ops", Subject: "dup", Body: "dup",
		SourceSiteID: "plant-1", SiteEnqueuedAt: time.Now().UTC(),
	}
	ctx := context.Background()
	submit := func() error {
		_, err := s.client.SignalWithStartWorkflow(ctx, workflows.NotificationWorkflowID(sub.NotificationID),
			workflows.SignalSubmit, sub, site.NotificationStartOptions(sub), workflows.NotificationWorkflow)
		return err
	}
	require.NoError(t, submit())
	require.NoError(t, submit()) // while running: signal to the same run, ignored
	s.waitStatus(workflows.StatusDelivered, 30*time.Second, sub.NotificationID)
	require.Error(t, submit(), "a submit for a closed workflow is refused as already started")
	time.Sleep(time.Second)
	require.Equal(t, 1, s.received()[sub.NotificationID])
}
