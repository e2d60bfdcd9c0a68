package activities_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/centraltest"
)

// centralT0 starts the mock clock of the workflow tests here: in the
// future, never a fixed date. The SDK's test environment computes a local
// activity's deadline from the mock clock but waits for it on the wall
// clock, so a start in the past makes each local activity's deadline
// already expired, and whether its result wins is a race.
var centralT0 = time.Now().UTC().Truncate(time.Second).Add(24 * time.Hour)

// Mirrored tracking rows are audited once each, however often and in
// whatever order they arrive: the change that creates the call's central
// row records its Enqueued event, whichever change that is.
func TestMirroredRowsAreAudited(t *testing.T) {
	t.Parallel()
	store, _ := centraltest.Open(t)
	var mu sync.Mutex
	stored := map[string]int{} // events stored, by operation
	store.ObserveAudit(func(events []centralstore.AuditEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range events {
			stored[e.OperationID]++
		}
	})
	acts := &activities.MirrorActivities{Store: store}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(acts)

	at := func(d time.Duration) *time.Time { t := centralT0.Add(d); return &t }
	op := "op-1"
	row := func(seq int64, status contract.Status, retries int, attempt *time.Time) contract.TrackedOperation {
		r := contract.TrackedOperation{
			OperationID: op, Kind: contract.KindExternalCall, Target: "erp.createOrder", Status: status,
			RetryCount: retries, SourceSiteID: "plant-1", CreatedAt: centralT0, UpdatedAt: centralT0.Add(time.Duration(seq) * time.Minute),
			LastAttemptAt: attempt, Seq: seq,
		}
		if status.Terminal() {
			r.TerminalAt = attempt
		}
		return r
	}
	history := []contract.TrackedOperation{
		row(1, contract.StatusPending, 0, nil),
		row(2, contract.StatusPending, 0, at(time.Second)),
		row(3, contract.StatusRetrying, 1, at(time.Minute)),
		row(4, contract.StatusParked, 2, at(2*time.Minute)),
		row(5, contract.StatusRetrying, 0, at(2*time.Minute)), // an operator's retry
		row(6, contract.StatusParked, 2, at(5*time.Minute)),   // parked again
		row(7, contract.StatusRetrying, 0, at(5*time.Minute)),
		row(8, contract.StatusDelivered, 1, at(10*time.Minute)),
	}
	_, err := env.ExecuteActivity(acts.MirrorSiteCalls, history[:4])
	require.NoError(t, err)
	_, err = env.ExecuteActivity(acts.MirrorSiteCalls, history[2:]) // a replayed overlap
	require.NoError(t, err)
	_, err = env.ExecuteActivity(acts.MirrorReconciled, contract.MirrorReconciledInput{SiteID: "plant-1", Rows: history[7:], Cursor: 8})
	require.NoError(t, err)

	trail := []string{
		"Enqueued Pending ", "Attempt Pending ", "Attempt Retrying ",
		"Attempt Parked ", "Terminal Parked ", "Attempt Parked ", "Terminal Parked ",
		"Attempt Delivered ", "Terminal Delivered ",
	}
	require.Equal(t, trail, centraltest.AuditTrail(t, store, "op-1"))

	// The delivery first, its row created by the last change; the earlier
	// changes after it, late.
	op = "op-2"
	var again []contract.TrackedOperation
	for _, r := range history {
		again = append(again, row(r.Seq, r.Status, r.RetryCount, r.LastAttemptAt))
	}
	_, err = env.ExecuteActivity(acts.MirrorSiteCalls, again[7:])
	require.NoError(t, err)
	_, err = env.ExecuteActivity(acts.MirrorSiteCalls, again[:7])
	require.NoError(t, err)
	require.Equal(t, trail, centraltest.AuditTrail(t, store, "op-2"))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"op-1": len(trail), "op-2": len(trail)}, stored, "each event stored once")
}
