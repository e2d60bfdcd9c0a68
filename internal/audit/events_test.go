package audit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

var t0 = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

// summary is "<event id suffix> <event> <status> <at offset>" per event.
func summary(prefix string, events []centralstore.AuditEvent) []string {
	out := []string{}
	for _, e := range events {
		out = append(out, fmt.Sprintf("%s %s %s %s", e.EventID[len(prefix):], e.Event, e.Status, e.At.Sub(t0)))
	}
	return out
}

func callRow(status contract.Status, retries int, attemptAt *time.Time) contract.TrackedOperation {
	row := contract.TrackedOperation{
		OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder", Status: status,
		RetryCount: retries, SourceSiteID: "plant-1", SourceNode: "node-a", CreatedAt: t0, UpdatedAt: t0.Add(time.Hour), LastAttemptAt: attemptAt,
	}
	if status.Terminal() {
		at := t0.Add(time.Hour)
		row.TerminalAt = &at
	}
	return row
}

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

func TestSiteCallEvents(t *testing.T) {
	t.Parallel()
	ms := func(d time.Duration) string { return fmt.Sprint(t0.Add(d).UnixMilli()) }
	cases := []struct {
		name string
		row  contract.TrackedOperation
		want []string
	}{
		{"accepted, not attempted yet", callRow(contract.StatusPending, 0, nil),
			[]string{"/enqueued Enqueued Pending 0s"}},
		{"immediate attempt failed transiently", callRow(contract.StatusPending, 0, at(time.Second)),
			[]string{"/enqueued Enqueued Pending 0s", "/attempt/0/" + ms(time.Second) + " Attempt Pending 1s"}},
		{"retry failed", callRow(contract.StatusRetrying, 2, at(time.Minute)),
			[]string{"/enqueued Enqueued Pending 0s", "/attempt/2/" + ms(time.Minute) + " Attempt Retrying 1m0s"}},
		{"operator retry resets the count: no attempt", callRow(contract.StatusRetrying, 0, at(time.Minute)),
			[]string{"/enqueued Enqueued Pending 0s"}},
		{"parked", callRow(contract.StatusParked, 3, at(3*time.Minute)), []string{
			"/enqueued Enqueued Pending 0s",
			"/attempt/3/" + ms(3*time.Minute) + " Attempt Parked 3m0s",
			"/terminal/Parked/3/" + ms(3*time.Minute) + " Terminal Parked 3m0s",
		}},
		{"delivered", callRow(contract.StatusDelivered, 1, at(time.Hour)), []string{
			"/enqueued Enqueued Pending 0s",
			"/attempt/1/" + ms(time.Hour) + " Attempt Delivered 1h0m0s",
			"/terminal/Delivered Terminal Delivered 1h0m0s",
		}},
		{"failed at once", callRow(contract.StatusFailed, 0, at(time.Second)), []string{
			"/enqueued Enqueued Pending 0s",
			"/attempt/0/" + ms(time.Second) + " Attempt Failed 1s",
			"/terminal/Failed Terminal Failed 1h0m0s",
		}},
		{"discarded: an operator action, not an attempt", callRow(contract.StatusDiscarded, 3, at(3*time.Minute)), []string{
			"/enqueued Enqueued Pending 0s",
			"/terminal/Discarded Terminal Discarded 1h0m0s",
		}},
	}
	for _, c := range cases {
		got := audit.SiteCallEvents(c.row)
		require.Equal(t, c.want, summary("call/op-1", got), c.name)
		for _, e := range got {
			require.Equal(t, "op-1", e.OperationID)
			require.Equal(t, contract.KindExternalCall, e.Kind)
			require.Equal(t, "plant-1", e.SiteID)
		}
	}

	// A second park after an operator retry is a new event, and the same
	// row mirrored twice gives the same ids.
	first := audit.SiteCallEvents(callRow(contract.StatusParked, 3, at(3*time.Minute)))
	again := audit.SiteCallEvents(callRow(contract.StatusParked, 3, at(3*time.Minute)))
	second := audit.SiteCallEvents(callRow(contract.StatusParked, 3, at(time.Hour)))
	require.Equal(t, first, again)
	for _, e := range first {
		require.Equal(t, "node-a", e.SourceNode, "every event of a call names the node that accepted it")
	}
	require.NotEqual(t, first[2].EventID, second[2].EventID)
	require.NotEqual(t, first[1].EventID, second[1].EventID)
}

func TestNotificationEvents(t *testing.T) {
	t.Parallel()
	const id = "n-1"
	prefix := "notification/" + id
	update := func(status contract.Status, retries, attempt int, op *contract.OperatorAction, seq int) contract.NotificationUpdate {
		return contract.NotificationUpdate{
			NotificationID: id, Status: status, RetryCount: retries, LastError: "connection refused",
			LastAttemptAt: at(time.Duration(attempt) * time.Minute), SiteID: "plant-1", At: t0.Add(time.Hour),
			Attempt: attempt, OperatorAction: op, OperatorSeq: seq,
		}
	}
	ana := &contract.OperatorAction{Operator: "ana", Reason: "relay fixed"}
	cases := []struct {
		name string
		upd  contract.NotificationUpdate
		want []string
	}{
		{"a run restarting its cycle records nothing", update(contract.StatusPending, 0, 0, nil, 0), []string{}},
		{"failed attempt, will retry", update(contract.StatusRetrying, 1, 1, nil, 0),
			[]string{"/attempt/1 Attempt Retrying 1m0s"}},
		{"failed attempt parks", update(contract.StatusParked, 2, 3, nil, 0),
			[]string{"/attempt/3 Attempt Parked 3m0s", "/terminal/Parked/3 Terminal Parked 3m0s"}},
		{"operator retry", update(contract.StatusPending, 0, 0, ana, 1),
			[]string{"/operator/1 OperatorRetry Pending 1h0m0s"}},
		{"operator discard", update(contract.StatusDiscarded, 2, 0, &contract.OperatorAction{}, 2),
			[]string{"/operator/2 OperatorDiscard Discarded 1h0m0s", "/terminal/Discarded Terminal Discarded 1h0m0s"}},
	}
	for _, c := range cases {
		got := audit.NotificationUpdated(c.upd)
		require.Equal(t, c.want, summary(prefix, got), c.name)
	}
	op := audit.NotificationUpdated(update(contract.StatusPending, 0, 0, ana, 1))[0]
	require.Equal(t, "ana", op.Operator)
	require.Equal(t, "relay fixed", op.Reason)
	require.Equal(t, "plant-1", op.SiteID)
	require.Equal(t, id, op.OperationID)
	require.Equal(t, contract.KindNotification, op.Kind)

	attempt := audit.NotificationUpdated(update(contract.StatusRetrying, 1, 1, nil, 0))[0]
	require.Equal(t, "retry count 1: connection refused", attempt.Detail)

	delivered := audit.NotificationDelivered(id, "plant-1", "node-a", 4, 0, t0.Add(2*time.Hour), []string{"a@example.com", "b@example.com"})
	require.Equal(t, []string{"/attempt/4/Delivered Attempt Delivered 2h0m0s", "/terminal/Delivered Terminal Delivered 2h0m0s"}, summary(prefix, delivered))
	require.Equal(t, "delivered to a@example.com, b@example.com", delivered[1].Detail)
	require.Equal(t, "node-a", delivered[1].SourceNode)

	enq := audit.NotificationEnqueued(centralstore.Notification{NotificationID: id, ListName: "ops", SourceSiteID: "plant-1", SourceNode: "node-b", SiteEnqueuedAt: t0}, "")
	require.Equal(t, []string{"/enqueued Enqueued Pending 0s"}, summary(prefix, []centralstore.AuditEvent{enq}))
	require.Equal(t, "node-b", enq.SourceNode, "the node that accepted it")
}

func TestOperatorActionOnCall(t *testing.T) {
	t.Parallel()
	e := audit.OperatorAction(contract.OperatorActionAudit{
		OperationID: "op-1", Kind: contract.KindDatabaseWrite, SiteID: "plant-1", Retry: false,
		Action: contract.OperatorAction{Operator: "bo", Reason: "entered by hand"}, Seq: 2,
		Status: contract.StatusDiscarded, At: t0,
	})
	require.Equal(t, centralstore.AuditEvent{
		EventID: "call/op-1/operator/2", OperationID: "op-1", Kind: contract.KindDatabaseWrite, SiteID: "plant-1",
		Event: centralstore.AuditOperatorDiscard, Status: contract.StatusDiscarded, Operator: "bo",
		Reason: "entered by hand", At: t0,
	}, e)
}

// The Enqueued event names who submitted the operation (the holder of the
// site API token it came with) as its operator; the events after it are
// central's and the target's, and name nobody.
func TestEnqueuedNamesTheSubmitter(t *testing.T) {
	t.Parallel()
	row := callRow(contract.StatusRetrying, 1, at(time.Minute))
	row.SubmittedBy = "scada"
	events := audit.SiteCallEvents(row)
	require.Equal(t, centralstore.AuditEnqueued, events[0].Event)
	require.Equal(t, "scada", events[0].Operator)
	for _, e := range events[1:] {
		require.Empty(t, e.Operator, e.EventID)
	}

	enq := audit.NotificationEnqueued(centralstore.Notification{NotificationID: "n-1", ListName: "ops", SourceSiteID: "plant-1", SiteEnqueuedAt: t0}, "scripts")
	require.Equal(t, "scripts", enq.Operator)
}

// A first attempt runs inside the workflow task that starts a notification,
// with the write that records its failure: when a central worker is killed
// before that task completes, the next worker replays the task and makes
// attempt 1 again. Both outcomes of attempt 1 stay in the audit trail: the
// delivered attempt's id is not the failed one's, which audit_log would
// keep instead.
func TestReplayedAttemptKeepsBothOutcomes(t *testing.T) {
	t.Parallel()
	failed := audit.NotificationUpdated(contract.NotificationUpdate{
		NotificationID: "n-1", Status: contract.StatusRetrying, RetryCount: 1, LastError: "451 relay busy", Attempt: 1, At: t0,
	})
	delivered := audit.NotificationDelivered("n-1", "plant-1", "", 1, 0, t0.Add(time.Minute), []string{"ops@example.com"})
	require.Len(t, failed, 1)
	require.NotEqual(t, failed[0].EventID, delivered[0].EventID)
	again := audit.NotificationDelivered("n-1", "plant-1", "", 1, 0, t0.Add(time.Minute), []string{"ops@example.com"})
	require.Equal(t, delivered[0].EventID, again[0].EventID, "the same delivery written again is one event")
}

// rowsOf maps every event id the changes store to the id of the row that
// holds it (its own for a row's head), failing when an id is held by two
// rows: the invariant that keeps a resent or reconciled change from
// storing an event twice. It also checks each change's rows hold exactly
// its events, in order.
func rowsOf(t *testing.T, changes map[string][]centralstore.AuditEvent, events map[string][]centralstore.AuditEvent) map[string]string {
	t.Helper()
	heldBy := map[string]string{}
	for name, rows := range changes {
		var flat []centralstore.AuditEvent
		for _, row := range rows {
			for _, c := range row.Carries {
				flat = append(flat, c)
				if held, ok := heldBy[c.EventID]; ok {
					require.Equal(t, held, row.EventID, "%s: %s is held by two rows", name, c.EventID)
				}
				heldBy[c.EventID] = row.EventID
			}
			bare := row
			bare.Carries = nil
			flat = append(flat, bare)
			if held, ok := heldBy[row.EventID]; ok {
				require.Equal(t, held, row.EventID, "%s: %s is held by two rows", name, row.EventID)
			}
			heldBy[row.EventID] = row.EventID
		}
		require.Equal(t, events[name], flat, "%s: the rows hold the change's events", name)
	}
	return heldBy
}

// withoutEnqueued is events less their Enqueued event, nil when none is left.
func withoutEnqueued(events []centralstore.AuditEvent) []centralstore.AuditEvent {
	var out []centralstore.AuditEvent
	for _, e := range events {
		if e.Event != centralstore.AuditEnqueued {
			out = append(out, e)
		}
	}
	return out
}

// Every state a call's tracking row passes through, in each of its
// histories (its immediate attempt parked without a retry included:
// ImmediateWasLast), gives rows in which an event id is only ever held by
// one row, the first change, which created the call's central row, holding
// Enqueued; a delivered call's change is one row, Enqueued riding in it
// when it created the row.
func TestSiteCallRowsHoldEachEventInOneRow(t *testing.T) {
	t.Parallel()
	histories := map[string][]contract.TrackedOperation{
		"retried, parked, retried by an operator, delivered": {
			callRow(contract.StatusPending, 0, nil),
			callRow(contract.StatusPending, 0, at(time.Second)),
			callRow(contract.StatusRetrying, 1, at(time.Minute)),
			callRow(contract.StatusParked, 2, at(2*time.Minute)),
			callRow(contract.StatusRetrying, 0, at(2*time.Minute)),
			callRow(contract.StatusDelivered, 1, at(3*time.Minute)),
		},
		"parked on its immediate attempt, discarded": {
			callRow(contract.StatusPending, 0, nil),
			callRow(contract.StatusPending, 0, at(time.Second)),
			callRow(contract.StatusParked, 0, at(time.Second)),
			callRow(contract.StatusDiscarded, 0, at(time.Second)),
		},
		"delivered at once": {callRow(contract.StatusPending, 0, nil), callRow(contract.StatusDelivered, 0, at(time.Second))},
		"failed at once":    {callRow(contract.StatusPending, 0, nil), callRow(contract.StatusFailed, 0, at(time.Second))},
	}
	heldBy := map[string]map[string]string{}
	for name, rows := range histories {
		changes, events := map[string][]centralstore.AuditEvent{}, map[string][]centralstore.AuditEvent{}
		for i, row := range rows {
			change := fmt.Sprintf("%s, change %d", name, i)
			created := i == 0
			changes[change], events[change] = audit.SiteCallRows(row, created), audit.SiteCallEvents(row)
			if !created { // Enqueued was stored with the row
				events[change] = withoutEnqueued(events[change])
			}
			require.Equal(t, changes[change], audit.SiteCallRows(row, created), "%s: the same row gives the same rows", change)
		}
		heldBy[name] = rowsOf(t, changes, events)
	}
	ms := func(d time.Duration) string { return fmt.Sprint(t0.Add(d).UnixMilli()) }
	require.Equal(t, "call/op-1/attempt/0/"+ms(time.Second),
		heldBy["parked on its immediate attempt, discarded"]["call/op-1/attempt/0/"+ms(time.Second)],
		"the immediate attempt parked without a retry stays its own row")
	require.Equal(t, "call/op-1/terminal/Parked/2/"+ms(2*time.Minute),
		heldBy["retried, parked, retried by an operator, delivered"]["call/op-1/attempt/2/"+ms(2*time.Minute)], "a retry's park carries it")
	for name, rows := range histories {
		require.Equal(t, audit.SiteCallRows(rows[0], true)[0].EventID, heldBy[name]["call/op-1/enqueued"], "%s: the first change holds Enqueued", name)
	}
	delivered := callRow(contract.StatusDelivered, 1, at(3*time.Minute))
	rows := audit.SiteCallRows(delivered, true)
	require.Equal(t, []string{"/terminal/Delivered Terminal Delivered 1h0m0s"}, summary("call/op-1", rows))
	require.Equal(t, []string{"/enqueued Enqueued Pending 0s", "/attempt/1/" + fmt.Sprint(t0.Add(3*time.Minute).UnixMilli()) + " Attempt Delivered 3m0s"},
		summary("call/op-1", rows[0].Carries), "the change that created the row carries Enqueued and the attempt")
	require.Equal(t, []string{"/attempt/1/" + fmt.Sprint(t0.Add(3*time.Minute).UnixMilli()) + " Attempt Delivered 3m0s"},
		summary("call/op-1", audit.SiteCallRows(delivered, false)[0].Carries), "a later change leaves Enqueued out")
}

// A notification's changes hold each event in one row, its first attempt
// recorded Retrying and then, replayed, parking included; a delivery and
// an operator's discard are one row each.
func TestNotificationRowsHoldEachEventInOneRow(t *testing.T) {
	t.Parallel()
	update := func(status contract.Status, attempt int, op *contract.OperatorAction, seq int) contract.NotificationUpdate {
		return contract.NotificationUpdate{NotificationID: "n-1", Status: status, RetryCount: attempt, SiteID: "plant-1",
			LastAttemptAt: at(time.Duration(attempt) * time.Minute), At: t0.Add(time.Hour), Attempt: attempt, OperatorAction: op, OperatorSeq: seq}
	}
	updates := map[string]contract.NotificationUpdate{
		"first attempt failed":           update(contract.StatusRetrying, 1, nil, 0),
		"first attempt replayed, parked": update(contract.StatusParked, 1, nil, 0),
		"second attempt parked":          update(contract.StatusParked, 2, nil, 0),
		"operator retry":                 update(contract.StatusPending, 0, &contract.OperatorAction{Operator: "ana"}, 1),
		"operator discard":               update(contract.StatusDiscarded, 0, &contract.OperatorAction{Operator: "bo"}, 2),
		"delivery the attempt could not record": {NotificationID: "n-1", Status: contract.StatusDelivered, SiteID: "plant-1",
			Attempt: 3, DeliveredAt: t0.Add(2 * time.Hour), ResolvedTargets: []string{"ops@example.com"}},
	}
	changes, events := map[string][]centralstore.AuditEvent{}, map[string][]centralstore.AuditEvent{}
	for name, u := range updates {
		changes[name], events[name] = audit.NotificationUpdatedRows(u), audit.NotificationUpdated(u)
	}
	delivered := func() []centralstore.AuditEvent {
		return audit.NotificationDelivered("n-1", "plant-1", "", 3, 0, t0.Add(2*time.Hour), []string{"ops@example.com"})
	}
	changes["delivered"] = audit.NotificationDeliveredRows("n-1", "plant-1", "", 3, 0, t0.Add(2*time.Hour), []string{"ops@example.com"})
	events["delivered"] = delivered()
	heldBy := rowsOf(t, changes, events)
	require.Equal(t, "notification/n-1/attempt/1", heldBy["notification/n-1/attempt/1"], "a first attempt is never carried")
	require.Equal(t, "notification/n-1/terminal/Parked/2", heldBy["notification/n-1/attempt/2"])
	require.Equal(t, "notification/n-1/terminal/Discarded", heldBy["notification/n-1/operator/2"])
	require.Len(t, changes["delivered"], 1)
	require.Equal(t, "notification/n-1/terminal/Delivered", heldBy["notification/n-1/attempt/3/Delivered"])
}
