package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/payloadcipher"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/temporalcontract"
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
	s.waitStatus(contract.StatusDelivered, time.Minute, ids...)
	received := s.received()
	store := s.centralStore()
	for _, id := range ids {
		require.Equal(t, 1, received[id], "emails for %s", id)
		row, err := store.GetNotification(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, contract.StatusDelivered, row.Status)
		require.Equal(t, []string{"ops@example.com", "oncall@example.com"}, row.ResolvedTargets)
		require.Equal(t, "plant-1", row.SourceSiteID)
		require.Equal(t, "node-a", row.SourceNode)
		require.Equal(t, "e2e", row.SourceScript)
		require.NotNil(t, row.DeliveredAt)
	}
	depth, err := s.daemon.Client.BufferDepth(context.Background())
	require.NoError(t, err)
	require.Zero(t, depth, "every acknowledged row leaves the site buffer")
	// The row is Delivered before its workflow completes: record it closed.
	wid := contract.NotificationWorkflowID(ids[0])
	require.NoError(t, s.client.GetWorkflow(context.Background(), wid, "").Get(context.Background(), nil))
	history := s.history(wid)
	requireNoStatusUpsert(t, history)
	requireStartedWithInput(t, s.client, wid, contract.WorkflowNotificationStarted, history)
	s.recordHistory(wid, "notification_delivered.json")
}

// requireNoStatusUpsert checks that the history of an operation delivered
// without trouble upserts no search attribute (its OutpostStatus keeps the
// Pending the site set at start) and records no version marker: a central
// worker of today's generation starts it without the version check whose
// TemporalChangeVersion upsert cost a visibility write, and leaves the
// Delivered unannounced.
func requireNoStatusUpsert(t *testing.T, events []*historypb.HistoryEvent) {
	t.Helper()
	var upserted []string
	for _, ev := range events {
		require.NotEqual(t, "Version", ev.GetMarkerRecordedEventAttributes().GetMarkerName(), "a version marker in the history")
		if attrs := ev.GetUpsertWorkflowSearchAttributesEventAttributes(); attrs != nil {
			upserted = append(upserted, slices.Sorted(maps.Keys(attrs.GetSearchAttributes().GetIndexedFields()))...)
		}
	}
	require.Empty(t, upserted, "search attributes upserted")
}

// requireStartedWithInput checks that the site started workflow wid with
// its submission as the input (central's workers are all of this
// generation): the started type wantType, and no signal in its history,
// one billed action less.
func requireStartedWithInput(t *testing.T, tc client.Client, wid, wantType string, events []*historypb.HistoryEvent) {
	t.Helper()
	desc, err := tc.DescribeWorkflowExecution(context.Background(), wid, "")
	require.NoError(t, err)
	require.Equal(t, wantType, desc.GetWorkflowExecutionInfo().GetType().GetName())
	for _, ev := range events {
		require.NotEqual(t, enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, ev.GetEventType(), "a signal in the history of %s", wid)
	}
	require.NotEmpty(t, events[0].GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads(), "the submission is the start's input")
}

// SMTP down: Retrying at the fixed interval, Parked after max retries; retry
// after SMTP is back delivers; discard ends Discarded.
func TestSMTPDownRetryParkRetryDiscard(t *testing.T) {
	const interval = 2 * time.Second
	s := newStack(t, func(c *config.Config) { c.Central.SMTP.RetryInterval = interval })
	s.stopSMTP()
	first := s.notify("ops", "first while smtp is down")
	second := s.notify("ops", "second while smtp is down")

	s.waitStatus(contract.StatusRetrying, 30*time.Second, first)
	st, _ := s.status(first)
	require.Contains(t, st.LastError, "connection refused")
	require.NotNil(t, st.NextAttemptAt)
	// The central row shows the same: Retrying, counted, why, and when next.
	retrying := s.waitNotificationRow(first, contract.StatusRetrying)
	require.GreaterOrEqual(t, retrying.RetryCount, 1)
	require.Contains(t, retrying.LastError, "connection refused")
	require.NotNil(t, retrying.LastAttemptAt)
	require.NotNil(t, retrying.NextAttemptAt)
	require.InDelta(t, interval.Seconds(), retrying.NextAttemptAt.Sub(*retrying.LastAttemptAt).Seconds(), 1,
		"next_attempt_at is the last attempt plus central.smtp.retry_interval")

	s.waitStatus(contract.StatusParked, time.Minute, first, second)
	st, _ = s.status(first)
	require.Equal(t, 2, st.RetryCount)
	require.Contains(t, st.LastError, "retries exhausted (2)")
	require.NotNil(t, st.LastAttemptAt)
	row, err := s.centralStore().GetNotification(context.Background(), first)
	require.NoError(t, err)
	require.Equal(t, contract.StatusParked, row.Status)
	// Attempts at 0 s, 2 s, 4 s: the fixed interval between every two, and
	// the retry after the Retrying row above came at its next_attempt_at.
	attempts := s.waitAttempts(first, 3)
	for i := 1; i < len(attempts); i++ {
		gap := attempts[i].Sub(attempts[i-1])
		t.Logf("gap before attempt %d: %s", i+1, gap)
		requireGap(t, interval, gap, "gap before attempt %d", i+1)
	}
	require.WithinDuration(t, attempts[retrying.RetryCount-1], *retrying.LastAttemptAt, time.Millisecond,
		"the Retrying row's last_attempt_at is attempt %d's", retrying.RetryCount)
	require.WithinDuration(t, *retrying.NextAttemptAt, attempts[retrying.RetryCount], time.Second,
		"attempt %d came at the Retrying row's next_attempt_at", retrying.RetryCount+1)
	require.WithinDuration(t, attempts[2], *st.LastAttemptAt, time.Millisecond, "the parked state's last attempt is the third")

	s.startSMTP()
	s.signal(first, contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "relay back"})
	s.signal(second, contract.SignalDiscard, contract.OperatorAction{})
	s.waitStatus(contract.StatusDelivered, 30*time.Second, first)
	s.waitStatus(contract.StatusDiscarded, 30*time.Second, second)

	received := s.received()
	require.Equal(t, 1, received[first])
	require.Zero(t, received[second])
	st, _ = s.status(first)
	require.Equal(t, 0, st.RetryCount, "retry resets the retry count")
	require.Equal(t, "ana", st.LastOperatorAction.Operator)
	row, err = s.centralStore().GetNotification(context.Background(), second)
	require.NoError(t, err)
	require.Equal(t, contract.StatusDiscarded, row.Status, "a discarded row is kept")
	s.recordHistory(contract.NotificationWorkflowID(first), "notification_retrying_parked_retried_delivered.json")
	s.recordHistory(contract.NotificationWorkflowID(second), "notification_parked_discarded.json")
}

// A permanent SMTP failure (5xx) and an unknown or empty list park at once;
// a transient rejection (4xx) retries and delivers once the relay accepts.
func TestPermanentFailuresParkTransientRejectionRetries(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Central.SMTP.MaxRetries = 5 })
	unknown := s.notify("no-such-list", "to nobody")
	empty := s.notify("empty", "to an empty list")
	s.waitStatus(contract.StatusParked, 30*time.Second, unknown, empty)
	st, _ := s.status(unknown)
	require.Contains(t, st.LastError, `notification list "no-such-list" does not exist at central`)
	require.Zero(t, st.RetryCount)
	st, _ = s.status(empty)
	require.Contains(t, st.LastError, "has no targets")

	s.sinks[0].Reject(550, "mailbox unavailable")
	rejected := s.notify("ops", "rejected by the relay")
	s.waitStatus(contract.StatusParked, 30*time.Second, rejected)
	st, _ = s.status(rejected)
	require.Contains(t, st.LastError, "550")
	require.Zero(t, st.RetryCount)

	s.sinks[0].Reject(451, "try again later")
	deferred := s.notify("ops", "deferred by the relay")
	s.waitStatus(contract.StatusRetrying, 30*time.Second, deferred)
	st, _ = s.status(deferred)
	require.Contains(t, st.LastError, "451")
	require.GreaterOrEqual(t, st.RetryCount, 1)
	s.sinks[0].Reject(0, "")
	s.waitStatus(contract.StatusDelivered, 30*time.Second, deferred)
	row, err := s.centralStore().GetNotification(context.Background(), deferred)
	require.NoError(t, err)
	require.Equal(t, contract.StatusDelivered, row.Status)
	received := s.received()
	require.Equal(t, 1, received[deferred], "one email once the relay accepts")
	require.Zero(t, received[rejected])
}

// Temporal down while notifications are submitted: the site accepts them all,
// and when Temporal is back they are delivered, none lost, none twice.
func TestTemporalDownNothingLost(t *testing.T) {
	s := newStack(t, nil)
	before := s.notify("ops", "before the outage")
	s.waitStatus(contract.StatusDelivered, 30*time.Second, before)

	s.stopTemporal()
	const n = 50
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.notify("ops", fmt.Sprintf("during the outage %d", i))
	}
	// Every row is answered locally, and its hand-off fails and is retried.
	// All rows that fail in one sweep get that sweep's time as their last
	// attempt, so the distinct last attempts seen are the failed sweeps.
	interval := s.cfg.Site.ForwardInterval
	sweeps := map[time.Time]bool{}
	require.Eventually(t, func() bool {
		done := true
		for _, id := range ids {
			st, _ := s.status(id)
			if st.LastAttemptAt != nil {
				sweeps[st.LastAttemptAt.UTC()] = true
				require.NotNil(t, st.NextAttemptAt)
				require.WithinDuration(t, st.LastAttemptAt.Add(interval), *st.NextAttemptAt, time.Millisecond,
					"a failed hand-off is due again one site.forward_interval later")
			}
			done = done && st.RetryCount >= 2
		}
		return done
	}, time.Minute, 200*time.Millisecond, "hand-offs retried at the forward interval while central is down")
	// Between two failed sweeps the forwarder waits the forward interval,
	// then the next sweep fails within the hand-off call timeout (5 s, the
	// forwarder's default): never sooner, and no backoff.
	times := slices.SortedFunc(maps.Keys(sweeps), time.Time.Compare)
	require.GreaterOrEqual(t, len(times), 4, "failed sweeps seen")
	minGap, maxGap := time.Hour, time.Duration(0)
	for i := 1; i < len(times); i++ {
		gap := times[i].Sub(times[i-1])
		minGap, maxGap = min(minGap, gap), max(maxGap, gap)
		require.GreaterOrEqual(t, gap, interval, "gap before failed sweep %d", i+1)
		require.LessOrEqual(t, gap, interval+5*time.Second+2*time.Second, "gap before failed sweep %d", i+1)
	}
	t.Logf("%d failed sweeps, %s to %s apart (site.forward_interval %s)", len(times), minGap, maxGap, interval)
	for _, id := range ids {
		st, code := s.status(id)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, contract.StatusForwarding, st.Status)
		require.Contains(t, st.LastError, "central unreachable")
	}
	_, code := s.status(before)
	require.Equal(t, http.StatusServiceUnavailable, code, "central's answer is unavailable during the outage")

	s.startTemporal()
	s.waitStatus(contract.StatusDelivered, 2*time.Minute, ids...)
	received := s.received()
	for _, id := range append(ids, before) {
		require.Equal(t, 1, received[id], "emails for %s", id)
	}
}

// A duplicate hand-off of the same id never sends a second email, whether
// the workflow is still running or already closed, and whether the site
// signals its submission (SignalWithStart: a site of an earlier version, or
// while an older central worker polls) or starts the workflow with it.
func TestDuplicateSubmitSendsOnce(t *testing.T) {
	s := newStack(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		handOff func(contract.NotificationSubmission) error
	}{
		{"signalled", func(sub contract.NotificationSubmission) error {
			_, err := s.client.SignalWithStartWorkflow(ctx, contract.NotificationWorkflowID(sub.NotificationID),
				contract.SignalSubmit, sub, sitedaemon.NotificationStartOptions(sub, false), contract.WorkflowNotification)
			return err
		}},
		{"started with its input", func(sub contract.NotificationSubmission) error {
			_, err := s.client.ExecuteWorkflow(ctx, sitedaemon.NotificationStartOptions(sub, false), contract.WorkflowNotificationStarted, sub)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := contract.NotificationSubmission{
				NotificationID: uuid.NewString(), ListName: "ops", Subject: "dup", Body: "dup",
				SourceSiteID: "plant-1", SiteEnqueuedAt: time.Now().UTC(),
			}
			require.NoError(t, tc.handOff(sub))
			require.NoError(t, tc.handOff(sub)) // while running: the same run answers
			s.waitStatus(contract.StatusDelivered, 30*time.Second, sub.NotificationID)
			// The row is Delivered before its workflow completes.
			wid := contract.NotificationWorkflowID(sub.NotificationID)
			require.NoError(t, s.client.GetWorkflow(ctx, wid, "").Get(ctx, nil))
			closed, err := s.client.DescribeWorkflowExecution(ctx, wid, "")
			require.NoError(t, err)
			// Refused as already started: SignalWithStart says so, and
			// ExecuteWorkflow answers with the closed run (the SDK's
			// default), both of which the forwarder takes as its ack.
			if err := tc.handOff(sub); err != nil {
				var started *serviceerror.WorkflowExecutionAlreadyStarted
				require.ErrorAs(t, err, &started)
			}
			desc, err := s.client.DescribeWorkflowExecution(ctx, wid, "")
			require.NoError(t, err)
			require.Equal(t, closed.GetWorkflowExecutionInfo().GetExecution().GetRunId(), desc.GetWorkflowExecutionInfo().GetExecution().GetRunId(), "no new run")
			require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.GetWorkflowExecutionInfo().GetStatus())
			require.Equal(t, closed.GetWorkflowExecutionInfo().GetHistoryLength(), desc.GetWorkflowExecutionInfo().GetHistoryLength(), "the closed run is left as it was")
			time.Sleep(time.Second)
			require.Equal(t, 1, s.received()[sub.NotificationID])
		})
	}
}

// waitNotificationRow waits until central's notifications row of id has
// status want and returns it.
func (s *stack) waitNotificationRow(id string, want contract.Status) centralstore.Notification {
	s.t.Helper()
	store := s.centralStore()
	var row centralstore.Notification
	require.Eventually(s.t, func() bool {
		var err error
		row, err = store.GetNotification(context.Background(), id)
		return err == nil && row.Status == want
	}, 30*time.Second, 50*time.Millisecond, "waiting for notifications row %s to be %s (last seen %q)", id, want, row.Status)
	return row
}

// waitAttempts waits until audit_log holds n Attempt events of notification
// id and returns their times, first attempt first.
func (s *stack) waitAttempts(id string, n int) []time.Time {
	s.t.Helper()
	store := s.centralStore()
	var at []time.Time
	require.Eventually(s.t, func() bool {
		events, err := store.ListAuditEvents(context.Background(), id)
		if err != nil {
			return false
		}
		at = make([]time.Time, n)
		seen := 0
		for _, e := range events {
			var k int
			if e.Event != centralstore.AuditAttempt {
				continue
			}
			if _, err := fmt.Sscanf(e.EventID, contract.NotificationWorkflowID(id)+"/attempt/%d", &k); err == nil && k >= 1 && k <= n {
				at[k-1] = e.At
				seen++
			}
		}
		return seen == n
	}, 30*time.Second, 100*time.Millisecond, "waiting for %d audited attempts of %s", n, id)
	return at
}

// requireGap checks that the time between two attempts is a retry interval:
// never sooner (a durable timer does not fire early; 250 ms for clock
// granularity), at most a second later (scheduling on a busy machine).
func requireGap(t *testing.T, interval, gap time.Duration, msgAndArgs ...any) {
	t.Helper()
	require.GreaterOrEqual(t, gap, interval-250*time.Millisecond, msgAndArgs...)
	require.LessOrEqual(t, gap, interval+time.Second, msgAndArgs...)
}

// The worker (an `outpost central` process) sends the email and marks the
// central row Delivered, but its completion never reaches Temporal: Temporal
// stops the moment the SMTP server has the message, and the worker is
// SIGKILLed before Temporal is back. The attempt times out; the workflow
// finds the row Delivered and ends Delivered (it failed with TerminalRow and
// read Pending forever before), and the email went out once.
func TestLostDeliveryCompletionEndsDelivered(t *testing.T) {
	s := newStack(t, nil, withoutCentral())
	start := s.centralProcess()
	central := start()
	temporalStopped := make(chan struct{})
	var once sync.Once
	// Runs before the sink answers 250: the activity cannot complete first.
	s.sinks[0].OnEmail(func(smtpsink.Message) { once.Do(func() { s.stopTemporal(); close(temporalStopped) }) })
	id := s.notify("ops", "completion lost")
	select {
	case <-temporalStopped:
	case <-time.After(time.Minute):
		t.Fatal("the email never reached the SMTP server")
	}
	store := s.centralStore()
	require.Eventually(t, func() bool {
		row, err := store.GetNotification(t.Context(), id)
		return err == nil && row.Status == contract.StatusDelivered
	}, 30*time.Second, 50*time.Millisecond, "the activity marks the row Delivered")
	central.kill()

	s.startTemporal()
	start()
	// The attempt's StartToClose (2 × smtp.timeout + final_reply_timeout + 30 s) must pass first.
	s.waitStatus(contract.StatusDelivered, 2*time.Minute, id)
	require.Equal(t, 1, s.received()[id], "one email")
	desc, err := s.client.DescribeWorkflowExecution(t.Context(), contract.NotificationWorkflowID(id), "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.WorkflowExecutionInfo.Status)
	// The workflow adopted the row's Delivered without its OutpostStatus
	// ever leaving the site's Pending: an operator reads Completed with
	// Pending as delivered, and so does `outpost status`.
	attr := desc.WorkflowExecutionInfo.SearchAttributes.IndexedFields[temporalcontract.AttrStatus.GetName()]
	require.NotNil(t, attr)
	require.Contains(t, string(attr.Data), string(contract.StatusPending))
	st, _ := s.status(id)
	require.Equal(t, contract.StatusDelivered, st.Status)
}

// A relay that answers 250 after smtp.timeout delivered the email: it is
// Delivered after one send (it was sent four times and parked before). One
// that has not answered by smtp.final_reply_timeout may have accepted it:
// it parks as uncertain after one send, for an operator to check.
func TestSlowRelayIsNotSentTwice(t *testing.T) {
	s := newStack(t, nil)
	late := s.cfg.Central.SMTP.Timeout + 2*time.Second
	tooLate := s.cfg.Central.SMTP.FinalReplyTimeout + 2*time.Second
	// The sink calls OnEmail before it answers the end of the message.
	s.sinks[0].OnEmail(func(m smtpsink.Message) {
		switch m.Subject {
		case "late":
			time.Sleep(late)
		case "too late":
			time.Sleep(tooLate)
		}
	})
	lateID, tooLateID := s.notify("ops", "late"), s.notify("ops", "too late")

	s.waitStatus(contract.StatusDelivered, time.Minute, lateID)
	st, _ := s.status(lateID)
	require.Zero(t, st.RetryCount)
	s.waitStatus(contract.StatusParked, time.Minute, tooLateID)
	st, _ = s.status(tooLateID)
	require.Contains(t, st.LastError, "delivery uncertain")
	require.Contains(t, st.LastError, tooLateID+"@outpost")
	received := s.received()
	require.Equal(t, 1, received[lateID], "sent once")
	require.Equal(t, 1, received[tooLateID], "sent once, then parked")
}

// With temporal.encryption_keys set, every process encrypts its payloads:
// a notification is delivered and its status read as usual, while the raw
// history (what the Web UI or temporal CLI shows without the key) holds
// nothing of its subject, body or list.
func TestPayloadsAreEncryptedInHistory(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "k1.key")
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(secret)), 0o600))
	s := newStack(t, func(c *config.Config) {
		c.Temporal.EncryptionKeys = []config.EncryptionKey{{ID: "k1", File: keyFile}}
	})
	id := s.notify("ops", "Pump 3 tripped: secret subject")
	s.waitStatus(contract.StatusDelivered, time.Minute, id)
	require.Equal(t, 1, s.received()[id])

	raw := s.server.Client() // no key: what an operator without it sees
	iter := raw.GetWorkflowHistory(t.Context(), contract.NotificationWorkflowID(id), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	payloads := 0
	for iter.HasNext() {
		event, err := iter.Next()
		require.NoError(t, err)
		// The binary form holds every payload's bytes as they are stored.
		data, err := proto.Marshal(event)
		require.NoError(t, err)
		for _, plain := range []string{"secret subject", `"listName"`, "ops@example.com"} {
			require.NotContains(t, string(data), plain, "event %s", event.GetEventType())
		}
		payloads += strings.Count(string(data), payloadcipher.Encoding)
	}
	require.Positive(t, payloads, "the payloads are marked encrypted")

	// A cached call's telemetry batch, compressed then encrypted, reaches
	// central's mirror: the worker decrypts, then decompresses.
	call, code := s.call("erp", "createOrder", map[string]any{"sku": "P-100", "qty": 2})
	require.Equal(t, http.StatusOK, code, "delivered on its first attempt")
	s.waitMirror(call.ID, contract.StatusDelivered)
	signal := s.signalPayload(contract.TelemetryIngestWorkflowID(s.cfg.Site.ID))
	require.Equal(t, payloadcipher.Encoding, string(signal.GetMetadata()[converter.MetadataEncoding]), "the batch is encrypted in the history")
	require.NotContains(t, string(signal.GetData()), call.ID)
	codec, err := payloadcipher.New([]payloadcipher.Key{{ID: "k1", Secret: secret}})
	require.NoError(t, err)
	inner, err := codec.Decode([]*commonpb.Payload{signal})
	require.NoError(t, err)
	require.Equal(t, temporalcontract.EncodingGzipJSON, string(inner[0].GetMetadata()[converter.MetadataEncoding]), "compressed under the encryption")
}

// signalPayload is the payload of the first signal in workflow id's history.
func (s *stack) signalPayload(id string) *commonpb.Payload {
	s.t.Helper()
	for _, ev := range s.history(id) {
		if signal := ev.GetWorkflowExecutionSignaledEventAttributes(); signal != nil {
			return signal.GetInput().GetPayloads()[0]
		}
	}
	s.t.Fatalf("%s has no signal", id)
	return nil
}

// Two central workers (`outpost central` processes); the one whose retry
// attempt is in DATA, the SMTP server holding its final reply, is
// SIGKILLed. The attempt heartbeats, so Temporal sees its worker gone
// within the heartbeat timeout and the other worker delivers the
// notification within 30 s of the kill, once. (Without heartbeats the
// attempt waited out its StartToClose timeout, here 2 × 5 s + 60 s + 30 s.)
// The held attempt is a retry, an ordinary activity: the first attempt may
// be a local activity, which a dead worker's workflow task timeout recovers.
func TestCentralWorkerKilledMidDeliveryIsRetriedByTheOther(t *testing.T) {
	s := newStack(t, func(c *config.Config) { c.Central.SMTP.FinalReplyTimeout = time.Minute }, withoutCentral())
	a := s.centralProcess()()
	sink := s.sinks[0]
	sink.Reject(451, "try again later")
	id := s.notify("ops", "held by a worker that dies")
	s.waitNotificationRow(id, contract.StatusRetrying)
	held := sink.HoldNextData()
	sink.Reject(0, "")
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no retry attempt reached the end of DATA")
	}
	b := s.centralProcess()()
	a.kill()
	killed := time.Now()
	testutil.WaitFor(t, 30*time.Second, func() bool { return s.received()[id] > 0 },
		func() string { return "the notification delivered by the other worker after the kill" })
	t.Logf("delivered %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	s.waitNotificationRow(id, contract.StatusDelivered)
	require.Equal(t, 1, s.received()[id], "sent once")
	require.True(t, strings.HasPrefix(s.deliveredBy(id), fmt.Sprintf("%d@", b.cmd.Process.Pid)),
		"delivered by worker %q, not the surviving process %d", s.deliveredBy(id), b.cmd.Process.Pid)
}

// deliveredBy is the identity of the worker whose delivery attempt of
// notification id completed: the one that started the activity task.
func (s *stack) deliveredBy(id string) string {
	s.t.Helper()
	delivery := map[int64]bool{} // scheduled event id → is a DeliverNotification
	started := map[int64]string{}
	for _, ev := range s.history(contract.NotificationWorkflowID(id)) {
		if attrs := ev.GetActivityTaskScheduledEventAttributes(); attrs != nil {
			delivery[ev.GetEventId()] = attrs.GetActivityType().GetName() == "DeliverNotification"
		}
		if attrs := ev.GetActivityTaskStartedEventAttributes(); attrs != nil {
			started[ev.GetEventId()] = attrs.GetIdentity()
		}
		if attrs := ev.GetActivityTaskCompletedEventAttributes(); attrs != nil && delivery[attrs.GetScheduledEventId()] {
			return started[attrs.GetStartedEventId()]
		}
	}
	require.Fail(s.t, "no delivery attempt completed", "notification %s", id)
	return ""
}
