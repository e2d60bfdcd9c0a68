package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/cli"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/operator"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// operatorOp is one operation the operator test made on a site.
type operatorOp struct {
	id, kind string
	site     *siteProc
}

// listedItem is what the test reads of `outpost parked list --json`.
type listedItem struct {
	Kind       string          `json:"kind"`
	ID         string          `json:"id"`
	WorkflowID string          `json:"workflowId"`
	Site       string          `json:"site"`
	Target     string          `json:"target"`
	Status     contract.Status `json:"status"`
	RetryCount int             `json:"retryCount"`
	LastError  string          `json:"lastError"`
	QueryError string          `json:"queryError"`
}

// Parks 50 items across two sites (20 calls and 5 notifications each),
// lists them by site, bulk-retries one site's items after the target is
// fixed and discards the other site's; every item ends where it should, on
// its site and in its workflow's result, and central's audit log names the
// operator who acted on it and why.
func TestOperatorParkedRetryAndDiscardBySite(t *testing.T) {
	s := newStack(t, nil)
	plant1, plant2 := s.firstSite(), s.addSite("plant-2")
	s.demo.FailNext(-1, http.StatusServiceUnavailable)
	s.stopSMTP()

	const calls, notifications = 20, 5
	ops := map[string][]operatorOp{}
	for _, p := range []*siteProc{plant1, plant2} {
		for i := range calls {
			res, code := p.call("erp", "createOrder", map[string]any{"sku": fmt.Sprintf("%s/%d", p.cfg.ID, i)})
			require.Equal(t, http.StatusAccepted, code, "a 503 is transient: %s", res.Error)
			ops[p.cfg.ID] = append(ops[p.cfg.ID], operatorOp{res.ID, contract.KindExternalCall, p})
		}
		for i := range notifications {
			id := p.notify("ops", fmt.Sprintf("%s alarm %d", p.cfg.ID, i))
			ops[p.cfg.ID] = append(ops[p.cfg.ID], operatorOp{id, contract.KindNotification, p})
		}
	}
	s.waitParkedCount(`OutpostStatus="Parked"`, 2*(calls+notifications), 2*time.Minute)

	// Listed by site: exactly that site's items, with their last errors.
	var listed []listedItem
	s.outpostJSON(&listed, "", "parked", "list", "--site", "plant-1", "--json")
	require.ElementsMatch(t, idsOf(ops["plant-1"]), listedIDs(listed), "exactly plant-1's items")
	for _, it := range listed {
		require.Equal(t, "plant-1", it.Site)
		require.Equal(t, contract.StatusParked, it.Status)
		require.Empty(t, it.QueryError)
		if it.Kind == contract.KindNotification {
			require.Equal(t, "ops", it.Target)
			require.Equal(t, contract.NotificationWorkflowID(it.ID), it.WorkflowID)
			require.Contains(t, it.LastError, "retries exhausted (2)")
		} else {
			require.Equal(t, contract.KindExternalCall, it.Kind)
			require.Equal(t, "erp.createOrder", it.Target)
			require.Equal(t, 3, it.RetryCount)
			require.Contains(t, it.LastError, "retries exhausted (3)")
		}
	}
	s.outpostJSON(&listed, "", "parked", "list", "--kind", "Notification", "--json")
	require.Len(t, listed, 2*notifications)
	s.outpostJSON(&listed, "", "parked", "list", "--site", "plant-2", "--target", "erp.createOrder", "--json")
	require.Len(t, listed, calls)
	s.outpostJSON(&listed, "", "parked", "list", "--older-than", "1h", "--json")
	require.Empty(t, listed, "age counts from when central got it: minutes ago")
	out, err := s.outpost("", "parked", "list", "--site", "plant-2")
	require.NoError(t, err)
	require.Contains(t, out, "LAST ERROR")
	require.Contains(t, out, fmt.Sprintf("%d parked item(s).", calls+notifications))

	// Asked, answered no: nothing is signalled, and the exit says so.
	out, err = s.outpost("n\n", "parked", "retry", "--site", "plant-1", "--operator", "ana")
	require.ErrorIs(t, err, cli.ErrDeclined)
	require.Contains(t, out, fmt.Sprintf("Retry %d parked items? [y/N]", calls+notifications))
	require.Contains(t, out, "Nothing signalled.")
	for _, op := range ops["plant-1"] {
		require.Zero(t, s.signalsReceived(workflowIDOf(op), contract.SignalRetry), "declined: %s not signalled", op.id)
	}

	// The target and the mail server are fixed: retry plant-1, discard plant-2.
	s.demo.Recover()
	s.startSMTP()
	out, err = s.outpost("", "parked", "retry", "--site", "plant-1", "--operator", "ana", "--reason", "fixed", "--yes")
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("Sent retry to %d item(s) as ana; 0 skipped, 0 failed.", calls+notifications))
	out, err = s.outpost("", "parked", "discard", "--site", "plant-2", "--operator", "bob", "--reason", "orders entered by hand", "--yes")
	require.NoError(t, err, out)
	require.Contains(t, out, fmt.Sprintf("Sent discard to %d item(s) as bob; 0 skipped, 0 failed.", calls+notifications))

	want := map[string]contract.Status{"plant-1": contract.StatusDelivered, "plant-2": contract.StatusDiscarded}
	for siteID, siteOps := range ops {
		for _, op := range siteOps {
			s.waitOnSite(op, want[siteID], time.Minute)
			require.Equal(t, want[siteID], s.workflowResult(op), "workflow result of %s", op.id)
		}
	}
	// The audit log shows who: every item has exactly one operator event,
	// ana's retry on plant-1 and bob's discard on plant-2, each with its reason.
	store := s.centralStore()
	wantAction := map[string]centralstore.AuditEvent{
		"plant-1": {Event: centralstore.AuditOperatorRetry, Operator: "ana", Reason: "fixed"},
		"plant-2": {Event: centralstore.AuditOperatorDiscard, Operator: "bob", Reason: "orders entered by hand"},
	}
	for _, siteOps := range ops {
		for _, op := range siteOps {
			// Audit rows are written in batches beside delivery: wait for them.
			testutil.WaitFor(t, 30*time.Second, func() bool { return len(s.operatorEvents(store, op.id)) > 0 },
				func() string { return fmt.Sprintf("an operator event for %s %s", op.kind, op.id) })
		}
	}
	for siteID, siteOps := range ops {
		w := wantAction[siteID]
		for _, op := range siteOps {
			got := s.operatorEvents(store, op.id)
			require.Len(t, got, 1, "operator events of %s %s", op.kind, op.id)
			e := got[0]
			require.Equal(t, workflowIDOf(op)+"/operator/1", e.EventID)
			require.Equal(t, w.Event, e.Event, "event of %s %s", op.kind, op.id)
			require.Equal(t, w.Operator, e.Operator, "operator of %s %s", op.kind, op.id)
			require.Equal(t, w.Reason, e.Reason, "reason of %s %s", op.kind, op.id)
			require.Equal(t, siteID, e.SiteID)
			require.Equal(t, op.kind, e.Kind)
		}
	}

	// Each site answers for its own operations only.
	_, code := plant1.operation(ops["plant-2"][0].id)
	require.Equal(t, http.StatusNotFound, code)

	delivered := map[string]int{}
	for _, r := range s.demo.Requests() {
		if r.Status == http.StatusOK {
			var body struct{ SKU string }
			require.NoError(t, json.Unmarshal(r.Body, &body))
			delivered[body.SKU]++
		}
	}
	require.Len(t, delivered, calls, "only plant-1's calls reached the target")
	for sku, n := range delivered {
		require.True(t, strings.HasPrefix(sku, "plant-1/"), sku)
		require.Equal(t, 1, n, "%s delivered once", sku)
	}
	mail := s.received()
	for siteID, siteOps := range ops {
		for _, op := range siteOps {
			if op.kind == contract.KindNotification {
				require.Equal(t, map[string]int{"plant-1": 1, "plant-2": 0}[siteID], mail[op.id], "emails for %s of %s", op.id, siteID)
			}
		}
	}
	s.waitParkedCount(`OutpostStatus="Parked"`, 0, 30*time.Second)
	s.outpostJSON(&listed, "", "parked", "list", "--json")
	require.Empty(t, listed)

	// One delivered call's and one delivered notification's whole story.
	call, note := ops["plant-1"][0], ops["plant-1"][calls]
	out, err = s.outpost("", "status", call.id)
	require.NoError(t, err)
	for _, want := range []string{
		"Operation", call.id, "ExternalCall (target erp.createOrder, site plant-1)", "Call erp.createOrder from plant-1",
		"Delivered", "workflow call/" + call.id + " (" + contract.WorkflowCachedCallStarted + "), Completed on task queue outpost-central",
		"attempts run on outpost-site-plant-1", "Web UI", "/namespaces/default/workflows/call%2F" + call.id + "/",
	} {
		require.Contains(t, out, want)
	}
	var story struct {
		OperationID    string                   `json:"operationId"`
		Kind           string                   `json:"kind"`
		Status         contract.Status          `json:"status"`
		Site           string                   `json:"site"`
		Target         string                   `json:"target"`
		FinishedAt     *time.Time               `json:"finishedAt"`
		OperatorAction *contract.OperatorAction `json:"operatorAction"`
		Workflow       struct{ ID, Status string }
		WebUI          string `json:"webUI"`
	}
	s.outpostJSON(&story, "", "status", "--json", contract.NotificationWorkflowID(note.id))
	require.Equal(t, note.id, story.OperationID)
	require.Equal(t, contract.KindNotification, story.Kind)
	require.Equal(t, contract.StatusDelivered, story.Status)
	require.Equal(t, "plant-1", story.Site)
	require.Equal(t, "ops", story.Target)
	require.NotNil(t, story.FinishedAt)
	require.Equal(t, &contract.OperatorAction{Operator: "ana", Reason: "fixed"}, story.OperatorAction)
	require.Equal(t, "Completed", story.Workflow.Status)
	require.Contains(t, story.WebUI, "/workflows/notification%2F"+note.id)

	_, err = s.outpost("", "status", "00000000-0000-4000-8000-000000000000")
	require.ErrorContains(t, err, "central has no workflow for 00000000-0000-4000-8000-000000000000: it may still be buffered on its site")
}

// outpost runs the outpost command line in process against this stack's
// Temporal, with stdin as its input, and returns its output.
func (s *stack) outpost(stdin string, args ...string) (string, error) {
	s.t.Helper()
	return s.outpostConfig(s.operatorConfig(), stdin, args...)
}

// outpostConfig runs the outpost command with --config configPath (none
// when empty).
func (s *stack) outpostConfig(configPath, stdin string, args ...string) (string, error) {
	s.t.Helper()
	var stdout, stderr bytes.Buffer
	// Three minutes: an air-gap import hands 1,100 operations to a dev
	// server, which on a loaded 2-core machine took over a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if configPath != "" {
		args = append(args, "--config", configPath)
	}
	err := cli.Run(ctx, args, cli.Env{Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader(stdin)})
	if stderr.Len() > 0 {
		s.t.Logf("outpost %s: stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	return stdout.String(), err
}

// outpostJSON runs a command with --json and decodes its output into v.
func (s *stack) outpostJSON(v any, stdin string, args ...string) {
	s.t.Helper()
	out, err := s.outpost(stdin, args...)
	require.NoError(s.t, err, out)
	require.NoError(s.t, json.Unmarshal([]byte(out), v), out)
}

// operatorConfig is a config file an operator would use for this stack: on
// the site host, so the parked commands also read what the site holds.
func (s *stack) operatorConfig() string {
	path := filepath.Join(s.dir, "operator.yaml")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	t := s.cfg.Temporal
	yaml := fmt.Sprintf("temporal:\n  address: %s\n  namespace: %s\n  tls_cert_file: %q\n  tls_key_file: %q\n  tls_ca_file: %q\n  tls_server_name: %q\n"+
		"site:\n  id: %s\n  store: %s\n"+
		"central:\n  temporal_ui_url: http://127.0.0.1:8233\n  store:\n    path: %s\nlog:\n  level: warn\n",
		t.Address, t.Namespace, t.TLSCertFile, t.TLSKeyFile, t.TLSCAFile, t.TLSServerName, s.cfg.Site.ID, s.cfg.Site.Store, s.cfg.Central.Store.Path)
	require.NoError(s.t, os.WriteFile(path, []byte(yaml), 0o644))
	return path
}

// waitParkedCount waits until visibility counts n workflows for query.
func (s *stack) waitParkedCount(query string, n int, timeout time.Duration) {
	s.t.Helper()
	var got int64 = -1
	testutil.WaitFor(s.t, timeout, func() bool {
		resp, err := s.client.CountWorkflow(context.Background(), &workflowservice.CountWorkflowExecutionsRequest{
			Namespace: s.cfg.Temporal.Namespace, Query: query,
		})
		got = resp.GetCount()
		return err == nil && got == int64(n)
	}, func() string { return fmt.Sprintf("%d workflows with %s (last count %d)", n, query, got) })
}

// signalsReceived counts the signals named name in a workflow's history.
func (s *stack) signalsReceived(workflowID, name string) int {
	s.t.Helper()
	n := 0
	for _, ev := range s.history(workflowID) {
		if ev.GetWorkflowExecutionSignaledEventAttributes().GetSignalName() == name {
			n++
		}
	}
	return n
}

// waitOnSite waits until the operation's own site reports want.
func (s *stack) waitOnSite(op operatorOp, want contract.Status, timeout time.Duration) {
	s.t.Helper()
	var got contract.Status
	testutil.WaitFor(s.t, timeout, func() bool {
		if op.kind == contract.KindNotification {
			st, _ := op.site.notification(op.id)
			got = st.Status
		} else {
			row, _ := op.site.operation(op.id)
			got = row.Status
		}
		return got == want
	}, func() string {
		return fmt.Sprintf("%s %s on %s to be %s (last seen %q)", op.kind, op.id, op.site.cfg.ID, want, got)
	})
}

// workflowResult is the status in the operation's workflow result.
func (s *stack) workflowResult(op operatorOp) contract.Status {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := s.client.GetWorkflow(ctx, workflowIDOf(op), "")
	if op.kind == contract.KindNotification {
		var st contract.NotificationState
		require.NoError(s.t, run.Get(ctx, &st))
		return st.Status
	}
	var row contract.TrackedOperation
	require.NoError(s.t, run.Get(ctx, &row))
	return row.Status
}

// operatorEvents is the OperatorRetry and OperatorDiscard events in an
// operation's audit trail.
func (s *stack) operatorEvents(store *centralstore.Store, id string) []centralstore.AuditEvent {
	s.t.Helper()
	events, err := store.ListAuditEvents(context.Background(), id)
	require.NoError(s.t, err)
	var out []centralstore.AuditEvent
	for _, e := range events {
		if e.Event == centralstore.AuditOperatorRetry || e.Event == centralstore.AuditOperatorDiscard {
			out = append(out, e)
		}
	}
	return out
}

func workflowIDOf(op operatorOp) string {
	if op.kind == contract.KindNotification {
		return contract.NotificationWorkflowID(op.id)
	}
	return contract.CachedCallWorkflowID(op.id)
}

func idsOf(ops []operatorOp) []string {
	ids := make([]string, 0, len(ops))
	for _, op := range ops {
		ids = append(ids, op.id)
	}
	sort.Strings(ids)
	return ids
}

func listedIDs(items []listedItem) []string {
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	sort.Strings(ids)
	return ids
}

// An operator cancels a parked notification and a parked call with the
// temporal CLI (the Web UI's Cancel does the same): each ends Discarded
// wherever it is recorded (central row, site tracking row, the buffer, the
// Parked KPI), with the cancel as the last operator action. Before, the
// request was silently ignored and the items stayed Parked.
func TestCancelFromTemporalCLIDiscards(t *testing.T) {
	s := newStack(t, nil)
	note, call := s.parkOneOfEach("Pump 3 tripped", "cancel")
	bin, err := devserver.TemporalBinary(t.Context())
	require.NoError(t, err)
	for _, id := range []string{contract.NotificationWorkflowID(note), contract.CachedCallWorkflowID(call.ID)} {
		out, err := exec.Command(bin, "workflow", "cancel", "--address", s.cfg.Temporal.Address,
			"--namespace", s.cfg.Temporal.Namespace, "--workflow-id", id).CombinedOutput()
		require.NoError(t, err, "temporal workflow cancel %s:\n%s", id, out)
	}

	s.waitStatus(contract.StatusDiscarded, time.Minute, note)
	st, _ := s.status(note)
	require.NotNil(t, st.LastOperatorAction)
	require.Contains(t, st.LastOperatorAction.Reason, "workflow cancelled")
	row := s.waitOperation(call.ID, contract.StatusDiscarded, time.Minute)
	require.Equal(t, contract.StatusDiscarded, row.Status)
	s.waitMirror(call.ID, contract.StatusDiscarded)
	depth, err := s.daemon.Client.BufferDepth(t.Context())
	require.NoError(t, err)
	require.Zero(t, depth, "the cancelled call's buffered payload is dropped")

	kpis, err := s.centralStore().KPIs(t.Context(), centralstore.KPIQuery{Now: time.Now(), StuckAge: time.Hour, Window: time.Hour})
	require.NoError(t, err)
	require.Zero(t, kpis.Global.Total.Parked, "nothing stays counted as Parked")
	for _, id := range []string{contract.NotificationWorkflowID(note), contract.CachedCallWorkflowID(call.ID)} {
		desc, err := s.client.DescribeWorkflowExecution(t.Context(), id, "")
		require.NoError(t, err)
		require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, desc.WorkflowExecutionInfo.Status, id)
	}
	s.recordHistory(contract.NotificationWorkflowID(note), "notification_parked_cancelled.json")
	s.recordHistory(contract.CachedCallWorkflowID(call.ID), "cachedcall_parked_cancelled.json")
}

// An operator terminates a parked notification and a parked call with the
// temporal CLI. A terminated workflow runs no code, so the site's next
// reconciliation settles both: the central row and the site's tracking row
// end Discarded, the call's buffered payload is dropped, the Parked KPI no
// longer counts them; outpost status says what happened, and outpost parked
// discard fails (non-zero) saying why instead of skipping with success.
func TestTerminatedWorkflowsAreSettledByReconciliation(t *testing.T) {
	s := newStack(t, nil)
	note, call := s.parkOneOfEach("Pump 3 tripped", "terminate")
	s.waitMirror(call.ID, contract.StatusParked)
	bin, err := devserver.TemporalBinary(t.Context())
	require.NoError(t, err)
	for _, id := range []string{contract.NotificationWorkflowID(note), contract.CachedCallWorkflowID(call.ID)} {
		out, err := exec.Command(bin, "workflow", "terminate", "--address", s.cfg.Temporal.Address,
			"--namespace", s.cfg.Temporal.Namespace, "--workflow-id", id, "--reason", "clean-up").CombinedOutput()
		require.NoError(t, err, "temporal workflow terminate %s:\n%s", id, out)
	}
	out, err := s.outpost("", "parked", "discard", note, "--operator", "ana")
	require.Error(t, err, "a discard that cannot reach the item is not a success")
	require.Contains(t, out, "its workflow was terminated: no signal can reach it")
	out, err = s.outpost("", "status", call.ID)
	require.NoError(t, err)
	require.Contains(t, out, "its workflow was terminated before the operation finished")
	require.Contains(t, out, `"system":"erp","method":"createOrder","params":{"password":"[redacted]","sku":"terminate"}`, "what the call sends, its secret redacted")

	// Before any reconciliation, the site and outpost status answer the
	// terminated notification Discarded (its status query still says
	// Parked), and the parked list leaves both out.
	st, code := s.status(note)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, contract.StatusDiscarded, st.Status, "the site learns the terminal state")
	require.Contains(t, st.LastError, "its workflow was terminated before it finished")
	require.Nil(t, st.NextAttemptAt)
	out, err = s.outpost("", "status", note, "--json")
	require.NoError(t, err)
	var story operator.Story
	require.NoError(t, json.Unmarshal([]byte(out), &story))
	require.Equal(t, contract.StatusDiscarded, story.Status)
	out, err = s.outpost("", "parked", "list", "--json")
	require.NoError(t, err)
	require.NotContains(t, out, note, "a terminated workflow is not parked")
	require.NotContains(t, out, call.ID)

	// Visibility must show the terminations before reconciliation can find them.
	testutil.WaitFor(t, 30*time.Second, func() bool {
		resp, err := s.client.ListWorkflow(t.Context(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: `ExecutionStatus="Terminated" AND OutpostSite="plant-1"`})
		return err == nil && len(resp.Executions) == 2
	}, func() string { return "terminations visible" })
	s.reconcile()

	row, err := s.centralStore().GetNotification(t.Context(), note)
	require.NoError(t, err)
	require.Equal(t, contract.StatusDiscarded, row.Status)
	require.Contains(t, row.LastError, "workflow terminated")
	s.waitOperation(call.ID, contract.StatusDiscarded, 30*time.Second)
	s.waitMirror(call.ID, contract.StatusDiscarded)
	require.Zero(t, s.bufferDepth(), "the call's buffered payload is dropped")
	kpis, err := s.centralStore().KPIs(t.Context(), centralstore.KPIQuery{Now: time.Now(), StuckAge: time.Hour, Window: time.Hour})
	require.NoError(t, err)
	require.Zero(t, kpis.Global.Total.Parked)

	s.reconcile() // settles nothing twice
	events, err := s.centralStore().ListAuditEvents(t.Context(), note)
	require.NoError(t, err)
	terminal := 0
	for _, e := range events {
		if e.Event == centralstore.AuditTerminal && e.Status == contract.StatusDiscarded {
			terminal++
		}
	}
	require.Equal(t, 1, terminal)
}
