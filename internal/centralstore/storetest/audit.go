package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

func newAuditEvent(opID string, n int, at time.Time) centralstore.AuditEvent {
	return centralstore.AuditEvent{
		EventID: fmt.Sprintf("call/%s/attempt/%d", opID, n), OperationID: opID, Kind: contract.KindExternalCall,
		SiteID: "plant-1", Event: centralstore.AuditAttempt, Status: contract.StatusRetrying,
		Detail: fmt.Sprintf("retry count %d: HTTP 503 — ünïcode", n), At: at.UTC().Truncate(time.Millisecond),
	}
}

// requireSameEvents compares times with Equal and every other field exactly.
func requireSameEvents(t *testing.T, want, got []centralstore.AuditEvent) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, want[i].At.Equal(got[i].At), "event %d at: want %s, got %s", i, want[i].At, got[i].At)
		w, g := want[i], got[i]
		w.At, g.At = time.Time{}, time.Time{}
		require.Equal(t, w, g, "event %d", i)
	}
}

func auditInsertIfNotExists(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	op := uuid.NewString()
	first := newAuditEvent(op, 1, time.Now())
	first.Event, first.Status, first.Operator, first.Reason = centralstore.AuditOperatorRetry, contract.StatusPending, "ana", "relay fixed"
	n, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{first})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// The same id again, even with other fields, is not stored again.
	rewrite := first
	rewrite.Detail, rewrite.Operator = "a rewrite must not overwrite", "bo"
	n, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{rewrite})
	require.NoError(t, err)
	require.Zero(t, n)

	// One batch holding an id twice, and an id stored already, stores the new one once.
	second := newAuditEvent(op, 2, time.Now().Add(time.Second))
	n, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{second, first, second})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	got, err := store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	requireSameEvents(t, []centralstore.AuditEvent{first, second}, got)

	// Over-long operator names and texts are cut, not refused: one bad
	// event must not block the batch it travels in.
	long := newAuditEvent(op, 3, time.Now().Add(2*time.Second))
	long.Operator, long.Reason = strings.Repeat("é", 300), strings.Repeat("r", 5000)
	n, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{long})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err = store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, strings.Repeat("é", 256), got[2].Operator)
	require.Len(t, got[2].Reason, 4000)
}

// A batch larger than one statement's chunk is stored whole, and written
// again stores nothing.
func auditLargeBatch(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	op := uuid.NewString()
	t0 := time.Now()
	events := make([]centralstore.AuditEvent, 1234)
	for i := range events {
		events[i] = newAuditEvent(op, i, t0.Add(time.Duration(i)*time.Millisecond))
	}
	n, err := store.InsertAuditEvents(ctx, events)
	require.NoError(t, err)
	require.Equal(t, len(events), n)
	got, err := store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	requireSameEvents(t, events, got)

	n, err = store.InsertAuditEvents(ctx, events)
	require.NoError(t, err)
	require.Zero(t, n, "a rewritten batch stores nothing")
}

// ListAuditEvents returns one operation's events, oldest first, whatever the
// order they were written in.
func auditListByOperation(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	op, other := uuid.NewString(), uuid.NewString()
	t0 := time.Now()
	enqueued := newAuditEvent(op, 0, t0)
	enqueued.EventID, enqueued.Event, enqueued.Status = "call/"+op+"/enqueued", centralstore.AuditEnqueued, contract.StatusPending
	attempt := newAuditEvent(op, 1, t0.Add(time.Minute))
	attempt.SourceNode = "node-b" // the node that accepted it; the others leave it NULL
	terminal := newAuditEvent(op, 1, t0.Add(time.Minute))
	terminal.EventID, terminal.Event, terminal.Status = "call/"+op+"/terminal/Delivered", centralstore.AuditTerminal, contract.StatusDelivered
	_, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{terminal, newAuditEvent(other, 1, t0), attempt, enqueued})
	require.NoError(t, err)

	got, err := store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	requireSameEvents(t, []centralstore.AuditEvent{enqueued, attempt, terminal}, got)

	got, err = store.ListAuditEvents(ctx, uuid.NewString())
	require.NoError(t, err)
	require.Empty(t, got)
}

// An operation's events are found by their ids: those of a notification
// and of a cached call, and none of an operation whose id begins with
// this one's.
func auditListByEventIDs(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	op, t0 := uuid.NewString(), time.Now()
	call := newAuditEvent(op, 1, t0)
	longer := newAuditEvent(op+"x", 1, t0) // call/<op>x/attempt/1 sorts beside this operation's ids
	notification := newAuditEvent(op, 2, t0.Add(time.Second))
	notification.EventID, notification.Kind = contract.NotificationWorkflowID(op)+"/attempt/2", contract.KindNotification
	_, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{longer, notification, call})
	require.NoError(t, err)

	got, err := store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	requireSameEvents(t, []centralstore.AuditEvent{call, notification}, got)
	got, err = store.ListAuditEvents(ctx, op+"x")
	require.NoError(t, err)
	requireSameEvents(t, []centralstore.AuditEvent{longer}, got)

	// An event its trail would not show is refused, with the batch it came in.
	stray, fine := newAuditEvent(op, 3, t0), newAuditEvent(op, 4, t0)
	stray.EventID = "attempt/3"
	_, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{fine, stray})
	require.ErrorContains(t, err, `audit event "attempt/3" of operation "`+op+`": its id must begin with "notification/`+op+`/" or "call/`+op+`/"`)
	// So is one whose id names a longer operation id: its range is not
	// this operation's.
	other := newAuditEvent(op, 5, t0)
	other.EventID = contract.CachedCallWorkflowID(op+"x") + "/attempt/5"
	_, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{other})
	require.ErrorContains(t, err, `its id must begin with`)
	got, err = store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	requireSameEvents(t, []centralstore.AuditEvent{call, notification}, got)
}

// carriedGroup is a change's events as package audit groups them: a
// discard's Terminal event carrying the operator's discard and the failed
// attempt before it, each with its own time and actor.
func carriedGroup(op string, t0 time.Time) (head centralstore.AuditEvent, events []centralstore.AuditEvent) {
	attempt := newAuditEvent(op, 1, t0)
	attempt.SourceNode = "node-b"
	discard := newAuditEvent(op, 2, t0.Add(time.Minute))
	discard.SourceNode, discard.EventID, discard.Event, discard.Status = "node-b", "call/"+op+"/operator/1", centralstore.AuditOperatorDiscard, contract.StatusDiscarded
	discard.Operator, discard.Reason, discard.Detail = "ana", "entered by hand", ""
	head = newAuditEvent(op, 3, t0.Add(2*time.Minute))
	head.SourceNode, head.EventID, head.Event, head.Status = "node-b", "call/"+op+"/terminal/Discarded", centralstore.AuditTerminal, contract.StatusDiscarded
	head.Carries = []centralstore.AuditEvent{attempt, discard}
	bare := head
	bare.Carries = nil
	return head, []centralstore.AuditEvent{attempt, discard, bare}
}

// A change stored as one row carrying its events is listed as every event,
// with its own time, detail, operator and reason, and its head's
// operation, site and node; written again it stores nothing (the count
// returned is what the store's observer is told).
func auditCarriedEvents(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	op := uuid.NewString()
	head, events := carriedGroup(op, time.Now())
	n, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{head})
	require.NoError(t, err)
	require.Equal(t, 3, n, "the row and the two events it carries")
	got, err := store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	requireSameEvents(t, events, got)

	n, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{head, head})
	require.NoError(t, err)
	require.Zero(t, n, "a resent change stores nothing")
	got, err = store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	requireSameEvents(t, events, got)

	// Carried texts are cut like the columns'.
	long, _ := carriedGroup(uuid.NewString(), time.Now())
	long.Carries[1].Operator, long.Carries[1].Reason = strings.Repeat("é", 300), strings.Repeat("r", 5000)
	_, err = store.InsertAuditEvents(ctx, []centralstore.AuditEvent{long})
	require.NoError(t, err)
	got, err = store.ListAuditEvents(ctx, long.OperationID)
	require.NoError(t, err)
	require.Len(t, got, 3)
	require.Equal(t, strings.Repeat("é", 256), got[1].Operator)
	require.Len(t, got[1].Reason, 4000)
}

// An Enqueued event rides in the row of the change that created its
// call's central row and is listed as an event of its own, with its time
// and submitter; a row carrying an event of another operation, or one its
// trail would not show, is refused with its batch.
func auditEnqueuedCarried(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	op, t0 := uuid.NewString(), time.Now().Truncate(time.Millisecond)
	enqueued := newAuditEvent(op, 0, t0)
	enqueued.EventID, enqueued.Event, enqueued.Status = "call/"+op+"/enqueued", centralstore.AuditEnqueued, contract.StatusPending
	enqueued.SourceNode, enqueued.Operator, enqueued.Detail = "node-b", "script:order.go", "target erp.postOrder"
	head, events := carriedGroup(op, t0.Add(time.Minute))
	head.Carries = append([]centralstore.AuditEvent{enqueued}, head.Carries...)
	n, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{head})
	require.NoError(t, err)
	require.Equal(t, 4, n, "the head and the three events it carries")
	got, err := store.ListAuditEvents(ctx, op)
	require.NoError(t, err)
	requireSameEvents(t, append([]centralstore.AuditEvent{enqueued}, events...), got)

	for name, carried := range map[string]func(*centralstore.AuditEvent){
		"other operation": func(e *centralstore.AuditEvent) { e.OperationID = uuid.NewString() },
		"stray id":        func(e *centralstore.AuditEvent) { e.EventID = "attempt/9" },
	} {
		bad, _ := carriedGroup(uuid.NewString(), t0)
		bad.Carries = slices.Clone(bad.Carries)
		carried(&bad.Carries[0])
		fine := newAuditEvent(bad.OperationID, 7, t0)
		_, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{fine, bad})
		require.Error(t, err, name)
		got, err := store.ListAuditEvents(ctx, bad.OperationID)
		require.NoError(t, err)
		require.Empty(t, got, "%s: the batch is refused whole", name)
	}
}

// Purge deletes a row by its time, the change's last event's: the events
// it carries, older, go with it, never before it.
func auditPurgeByHeadTime(t *testing.T, store *centralstore.Store) {
	ctx := context.Background()
	req := purgeRequest(100)
	head, events := carriedGroup(uuid.NewString(), req.AuditLogBefore.Add(-90*time.Second))
	require.True(t, head.Carries[0].At.Before(req.AuditLogBefore) && !head.At.Before(req.AuditLogBefore),
		"the group straddles the cutoff")
	_, err := store.InsertAuditEvents(ctx, []centralstore.AuditEvent{head})
	require.NoError(t, err)
	_, err = store.Purge(ctx, req)
	require.NoError(t, err)
	got, err := store.ListAuditEvents(ctx, head.OperationID)
	require.NoError(t, err)
	requireSameEvents(t, events, got)

	res, err := store.Purge(ctx, centralstore.PurgeRequest{AuditLogBefore: head.At.Add(time.Second), Batch: 100})
	require.NoError(t, err)
	require.Equal(t, 1, res.AuditLog, "one row held the change's events")
	got, err = store.ListAuditEvents(ctx, head.OperationID)
	require.NoError(t, err)
	require.Empty(t, got)
}
