package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/workers"
)

// SMTP down: the notification retries and parks, the operator ana retries it
// and it is delivered; audit_log tells that story, each event once. The
// central worker has created the daily purge schedule, and triggering it
// runs PurgeWorkflow.
func TestAuditNotificationParkedThenRetriedByOperator(t *testing.T) {
	s := newStack(t, nil)
	s.requirePurgeSchedule()

	s.stopSMTP()
	id := s.notify("ops", "audited while smtp is down")
	s.waitStatus(contract.StatusParked, time.Minute, id)
	s.startSMTP()
	s.signal(id, contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "relay back"})
	s.waitStatus(contract.StatusDelivered, 30*time.Second, id)

	// max_retries 2: attempts 1 and 2 fail and retry, attempt 3 parks.
	s.waitAudit(id, []string{
		"enqueued Enqueued Pending",
		"attempt/1 Attempt Retrying",
		"attempt/2 Attempt Retrying",
		"attempt/3 Attempt Parked",
		"terminal/Parked/3 Terminal Parked",
		"operator/1 OperatorRetry Pending ana relay back",
		"attempt/4/Delivered Attempt Delivered",
		"terminal/Delivered Terminal Delivered",
	})
}

// A cached call that parks and is retried by an operator: its attempts and
// terminal states come from the site_calls mirror, the operator's retry from
// the workflow.
func TestAuditCachedCallParkedThenRetriedByOperator(t *testing.T) {
	s := newStack(t, nil)
	s.demo.FailNext(-1, http.StatusBadGateway)
	res, code := s.call("erp", "createOrder", map[string]any{"sku": "audit-me"})
	require.Equal(t, http.StatusAccepted, code)
	parked := s.waitOperation(res.ID, contract.StatusParked, time.Minute)
	s.waitMirror(res.ID, contract.StatusParked)

	s.demo.Recover()
	s.signalCall(res.ID, contract.SignalRetry, contract.OperatorAction{Operator: "ana", Reason: "ERP is back"})
	delivered := s.waitOperation(res.ID, contract.StatusDelivered, 30*time.Second)
	s.waitMirror(res.ID, contract.StatusDelivered)

	key := func(row contract.TrackedOperation) string {
		return fmt.Sprintf("%d/%d", row.RetryCount, row.LastAttemptAt.UnixMilli())
	}
	// The immediate attempt (retry count 0) and retries 1 and 2 fail, retry 3
	// parks; after the operator's retry, retry 1 delivers.
	events := s.waitAuditPrefix(res.ID, 4, []string{
		"enqueued Enqueued Pending",
		"attempt/0/ Attempt Pending",
		"attempt/1/ Attempt Retrying",
		"attempt/2/ Attempt Retrying",
		"attempt/" + key(parked) + " Attempt Parked",
		"terminal/Parked/" + key(parked) + " Terminal Parked",
		"operator/1 OperatorRetry Retrying ana ERP is back",
		"attempt/" + key(delivered) + " Attempt Delivered",
		"terminal/Delivered Terminal Delivered",
	})
	require.Len(t, events, 9)
}

// auditLines is the audit trail of one operation, one line per event: the
// event id after the workflow id, event, status, then operator and reason
// when set.
func (s *stack) auditLines(id string) []string {
	s.t.Helper()
	events, err := s.centralStore().ListAuditEvents(context.Background(), id)
	require.NoError(s.t, err)
	out := []string{}
	for _, e := range events {
		_, suffix, _ := strings.Cut(e.EventID, id+"/")
		out = append(out, strings.TrimSpace(strings.Join([]string{suffix, string(e.Event), string(e.Status), e.Operator, e.Reason}, " ")))
	}
	return out
}

// waitAudit waits until the operation's audit trail is exactly want.
func (s *stack) waitAudit(id string, want []string) {
	s.t.Helper()
	s.waitAuditMatch(id, want, func(got []string) bool { return strings.Join(got, "\n") == strings.Join(want, "\n") })
}

// waitAuditMatch waits up to 30 s until the operation's audit trail
// matches, and fails showing the last trail read beside want.
func (s *stack) waitAuditMatch(id string, want []string, match func(got []string) bool) []string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := s.auditLines(id)
		if match(got) {
			return got
		}
		if time.Now().After(deadline) {
			require.Failf(s.t, "audit trail never matched", "audit trail of %s:\n%s\nwant:\n%s", id, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitAuditPrefix is waitAudit where each line of want may be a prefix of
// the id up to its first space (the first `loose` lines carry attempt
// times the test does not know).
func (s *stack) waitAuditPrefix(id string, loose int, want []string) []string {
	s.t.Helper()
	match := func(got []string) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range want {
			if i == 0 || i > loose {
				if got[i] != want[i] {
					return false
				}
				continue
			}
			wantID, wantRest, _ := strings.Cut(want[i], " ")
			gotID, gotRest, _ := strings.Cut(got[i], " ")
			if !strings.HasPrefix(gotID, wantID) || gotRest != wantRest {
				return false
			}
		}
		return true
	}
	return s.waitAuditMatch(id, want, match)
}

// A central worker delivers while Temporal does not answer its purge
// schedule's creation, and creates the schedule once Temporal answers. A
// worker restarted during a burst once exited five times in a row on
// "update schedule outpost-purge: context deadline exceeded" before
// delivering anything.
func TestCentralDeliversBeforeItsPurgeScheduleIsEnsured(t *testing.T) {
	s := newStack(t, nil, withoutCentral())
	var refuse atomic.Bool
	var refused atomic.Int32
	refuse.Store(true)
	timeOut := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if strings.HasSuffix(method, "/CreateSchedule") && refuse.Load() {
			refused.Add(1)
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		}
		return invoke(ctx, method, req, reply, cc, opts...)
	}
	tc, err := client.Dial(client.Options{HostPort: s.cfg.Temporal.Address, Namespace: s.cfg.Temporal.Namespace,
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(timeOut)}}})
	require.NoError(t, err)
	t.Cleanup(tc.Close)
	s.startCentralWith(tc)

	id, code, err := postNotification(t.Context(), http.DefaultClient, s.siteURL, site.Notification{List: "ops", Subject: "pump 3 tripped", Body: "b"})
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code)
	s.waitStatus(contract.StatusDelivered, time.Minute, id)
	purge := s.client.ScheduleClient().GetHandle(t.Context(), contract.PurgeScheduleID)
	_, err = purge.Describe(t.Context())
	require.Error(t, err, "no purge schedule while Temporal refuses it")
	require.Positive(t, refused.Load(), "the worker tried")

	refuse.Store(false)
	testutil.WaitFor(t, 2*time.Minute, func() bool { _, err := purge.Describe(t.Context()); return err == nil },
		func() string { return fmt.Sprintf("the purge schedule, after %d refusals", refused.Load()) })
}

// requirePurgeSchedule checks the schedule the central worker created,
// ensures it again (the update path of a restart), and triggers one run.
func (s *stack) requirePurgeSchedule() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(s.t, workers.EnsurePurgeSchedule(ctx, s.client, contract.Region{}), "ensuring an existing schedule updates it")
	h := s.client.ScheduleClient().GetHandle(ctx, contract.PurgeScheduleID)
	desc, err := h.Describe(ctx)
	require.NoError(s.t, err)
	action, ok := desc.Schedule.Action.(*client.ScheduleWorkflowAction)
	require.True(s.t, ok, "action %T", desc.Schedule.Action)
	require.Equal(s.t, contract.WorkflowPurge, action.Workflow)
	require.Equal(s.t, contract.CentralTaskQueue, action.TaskQueue)
	require.Equal(s.t, enums.SCHEDULE_OVERLAP_POLICY_SKIP, desc.Schedule.Policy.Overlap)
	require.Len(s.t, desc.Schedule.Spec.Calendars, 1)
	require.Equal(s.t, []client.ScheduleRange{{Start: 3, End: 3, Step: 1}}, desc.Schedule.Spec.Calendars[0].Hour)
	require.False(s.t, desc.Schedule.State.Paused)

	require.NoError(s.t, h.Trigger(ctx, client.ScheduleTriggerOptions{}))
	var run *client.ScheduleWorkflowExecution
	require.Eventually(s.t, func() bool {
		d, err := h.Describe(ctx)
		if err != nil || len(d.Info.RecentActions) == 0 {
			return false
		}
		run = d.Info.RecentActions[0].StartWorkflowResult
		return run != nil
	}, 30*time.Second, 100*time.Millisecond, "the triggered purge starts")
	var res contract.PurgeResult
	require.NoError(s.t, s.client.GetWorkflow(ctx, run.WorkflowID, run.FirstExecutionRunID).Get(ctx, &res))
	require.Equal(s.t, contract.PurgeResult{}, res, "nothing is past a year's retention yet")
}

// The central worker, a child process, is SIGKILLed while a burst of
// notifications is being delivered, then started again. Every notification
// ends Delivered with its audit trail whole: one Enqueued event, one
// delivered Attempt, one Terminal Delivered. (Events waited in memory
// before, and a kill lost those not yet written.)
func TestAuditSurvivesCentralKilledMidBurst(t *testing.T) {
	s := newStack(t, nil, withoutCentral())
	start := s.centralProcess()
	central := start()

	const n = 150
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.notify("ops", fmt.Sprintf("burst %d", i))
	}
	testutil.WaitFor(t, time.Minute, func() bool { return len(s.received()) >= n/5 },
		func() string { return fmt.Sprintf("%d of %d delivered before the kill", len(s.received()), n) })
	central.kill()
	t.Logf("central killed with %d of %d notifications delivered", len(s.received()), n)
	start()

	s.waitStatus(contract.StatusDelivered, 3*time.Minute, ids...)
	store := s.centralStore()
	for _, id := range ids {
		events, err := store.ListAuditEvents(t.Context(), id)
		require.NoError(t, err)
		counts := map[string]int{}
		for _, e := range events {
			counts[string(e.Event)+" "+string(e.Status)]++
		}
		require.Equal(t, 1, counts["Enqueued Pending"], "%s: %v", id, counts)
		require.Equal(t, 1, counts["Attempt Delivered"], "%s: %v", id, counts)
		require.Equal(t, 1, counts["Terminal Delivered"], "%s: %v", id, counts)
	}
}

// centralProcess writes a config for an `outpost central` child process
// beside this stack (its store, SMTP server and lists; at least 5 retries,
// so a kill leaves retries to run) and returns what
// starts one and waits until it is ready; the test SIGKILLs it at will.
// Each call writes its own config with its own listen address, so the
// processes of two calls run side by side.
func (s *stack) centralProcess() func() *siteProcess {
	s.t.Helper()
	bin, cfgFile, baseURL, httpc := s.centralProcessConfig()
	return func() *siteProcess { return startProcess(s.t, bin, "central", cfgFile, baseURL, httpc) }
}

// supervisedCentralProcess is centralProcess started again, as systemd
// would, when it exits before it is ready (startProcessSupervised).
func (s *stack) supervisedCentralProcess() func() *siteProcess {
	s.t.Helper()
	bin, cfgFile, baseURL, httpc := s.centralProcessConfig()
	return func() *siteProcess { return startProcessSupervised(s.t, bin, "central", cfgFile, baseURL, httpc) }
}

// centralProcessConfig writes centralProcess's config file and returns
// what starts and reaches the process.
func (s *stack) centralProcessConfig() (bin, cfgFile, baseURL string, httpc *http.Client) {
	s.t.Helper()
	bin = testutil.BuildOutpost(s.t)
	listen := freeAddr(s.t)
	smtp := s.cfg.Central.SMTP
	f, err := os.CreateTemp(s.dir, "central-*.yaml")
	require.NoError(s.t, err)
	require.NoError(s.t, f.Close())
	cfgFile = f.Name()
	require.NoError(s.t, os.WriteFile(cfgFile, fmt.Appendf(nil, `temporal:
  address: %s
central:
  listen: %s
  store: %s
  smtp: {host: 127.0.0.1, port: %d, tls: none, timeout: %s, final_reply_timeout: %s, retry_interval: %s, max_retries: %d}
  lists: {ops: [ops@example.com]}
log: {level: error}
`, s.cfg.Temporal.Address, listen, s.centralStoreYAML(), smtp.Port, smtp.Timeout, smtp.FinalReplyTimeout, smtp.RetryInterval, max(5, smtp.MaxRetries)), 0o644))
	return bin, cfgFile, "http://" + listen, &http.Client{Timeout: 5 * time.Second}
}

// centralStoreYAML is the stack's central.store as a child process's
// config has it (the password stays in its variable).
func (s *stack) centralStoreYAML() string {
	st := s.cfg.Central.Store
	if st.Driver == config.DriverPostgres {
		return fmt.Sprintf("{driver: postgres, dsn: %q, password_env: %s}", st.DSN, st.PasswordEnv)
	}
	return fmt.Sprintf("{path: %q}", st.Path)
}
