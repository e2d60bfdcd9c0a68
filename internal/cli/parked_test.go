package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/operator"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// fakeTemporal stands in for Temporal in the operator commands' unit tests
// (the end-to-end tests in internal/e2e run them on the real dev server,
// whose visibility store evaluates the queries). ListWorkflow answers only
// the queries a test expects, with the workflows it names (see listed): a
// command that builds another query fails.
type fakeTemporal struct {
	mu        sync.Mutex
	workflows map[string]*fakeWorkflow
	lists     map[string][]string // visibility query → workflow ids
	pageSize  int
	signals   []fakeSignal
	failOn    map[string]error // signal errors by workflow id
}

// parkedQuery is the visibility query of every parked operation, with
// clauses appended for a filter's flags.
func parkedQuery(clauses ...string) string {
	return strings.Join(append([]string{`OutpostStatus="Parked"`, `ExecutionStatus="Running"`}, clauses...), " AND ")
}

// listed makes ListWorkflow answer query with the workflows of ids.
func (f *fakeTemporal) listed(query string, ids ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists[query] = ids
}

type fakeWorkflow struct {
	info    *workflowpb.WorkflowExecutionInfo
	state   any // NotificationState or TrackedOperation
	summary string
	pending []*workflowpb.PendingActivityInfo
}

type fakeSignal struct {
	workflowID, name string
	action           contract.OperatorAction
}

func newFake() *fakeTemporal {
	return &fakeTemporal{workflows: map[string]*fakeWorkflow{}, lists: map[string][]string{}, pageSize: 2, failOn: map[string]error{}}
}

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

func payload(v any) *commonpb.Payload {
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		panic(err)
	}
	return p
}

// addCall adds a cached call's workflow, started at t0+age minutes.
func (f *fakeTemporal) addCall(id, site, target string, status contract.Status, minute int) *fakeWorkflow {
	wid := contract.CachedCallWorkflowID(id)
	last := t0.Add(time.Duration(minute)*time.Minute + 30*time.Second)
	return f.add(wid, contract.WorkflowCachedCall, contract.KindExternalCall, site, target, status, minute, "Call "+target+" from "+site,
		contract.CachedCallState{TrackedOperation: contract.TrackedOperation{
			OperationID: id, Kind: contract.KindExternalCall, Target: target, Status: status, RetryCount: 3,
			LastError: "retries exhausted (3): HTTP 503 Service Unavailable", SourceSiteID: site,
			CreatedAt: t0.Add(time.Duration(minute) * time.Minute), LastAttemptAt: &last,
		}, LastOperatorAction: deliveredAfterRetry(status)})
}

// deliveredAfterRetry is the operator action of a fake call: a delivered
// one was retried by ana once its target was fixed.
func deliveredAfterRetry(status contract.Status) *contract.OperatorAction {
	if status != contract.StatusDelivered {
		return nil
	}
	return &contract.OperatorAction{Operator: "ana", Reason: "erp back"}
}

func (f *fakeTemporal) addNotification(id, site, list string, status contract.Status, minute int) *fakeWorkflow {
	wid := contract.NotificationWorkflowID(id)
	last := t0.Add(time.Duration(minute)*time.Minute + 20*time.Second)
	return f.add(wid, contract.WorkflowNotification, contract.KindNotification, site, list, status, minute, "Notify "+list+": Pump 3 tripped",
		contract.NotificationState{
			NotificationID: id, Status: status, RetryCount: 2, LastError: "retries exhausted (2): dial tcp: connection refused",
			SiteEnqueuedAt: t0.Add(time.Duration(minute) * time.Minute), CreatedAt: t0.Add(time.Duration(minute) * time.Minute), LastAttemptAt: &last,
		})
}

func (f *fakeTemporal) add(wid, typ, kind, site, target string, status contract.Status, minute int, summary string, state any) *fakeWorkflow {
	exec := enums.WORKFLOW_EXECUTION_STATUS_RUNNING
	var closed *timestamppb.Timestamp
	if status.Terminal() {
		exec, closed = enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, timestamppb.New(t0.Add(time.Duration(minute+1)*time.Minute))
	}
	w := &fakeWorkflow{
		info: &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: "run-" + wid},
			Type:      &commonpb.WorkflowType{Name: typ}, TaskQueue: contract.CentralTaskQueue, Status: exec,
			StartTime: timestamppb.New(t0.Add(time.Duration(minute) * time.Minute)), CloseTime: closed, HistoryLength: 42,
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				"OutpostStatus": payload(string(status)), "OutpostKind": payload(kind),
				"OutpostSite": payload(site), "OutpostTarget": payload(target),
			}},
		},
		state: state, summary: summary,
	}
	f.workflows[wid] = w
	return w
}

func (f *fakeTemporal) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids, ok := f.lists[req.GetQuery()]
	if !ok {
		return nil, serviceerror.NewInvalidArgument(fmt.Sprintf("the test expects no visibility query %q", req.GetQuery()))
	}
	match := make([]*workflowpb.WorkflowExecutionInfo, len(ids))
	for i, id := range ids {
		match[i] = f.workflows[id].info
	}
	sort.Slice(match, func(i, j int) bool { return match[i].StartTime.AsTime().After(match[j].StartTime.AsTime()) })
	from := 0
	if len(req.NextPageToken) > 0 {
		from, _ = strconv.Atoi(string(req.NextPageToken))
	}
	to := min(from+f.pageSize, len(match))
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: match[from:to]}
	if to < len(match) {
		resp.NextPageToken = []byte(strconv.Itoa(to))
	}
	return resp, nil
}

func (f *fakeTemporal) DescribeWorkflowExecution(_ context.Context, workflowID, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.workflows[workflowID]
	if !ok {
		return nil, serviceerror.NewNotFound("workflow not found for ID: " + workflowID)
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: w.info,
		ExecutionConfig:       &workflowpb.WorkflowExecutionConfig{UserMetadata: &sdkpb.UserMetadata{Summary: payload(w.summary)}},
		PendingActivities:     w.pending,
	}, nil
}

func (f *fakeTemporal) QueryWorkflow(_ context.Context, workflowID, _, queryType string, _ ...any) (converter.EncodedValue, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.workflows[workflowID]
	if !ok || queryType != contract.QueryStatus {
		return nil, serviceerror.NewNotFound("no " + queryType + " for " + workflowID)
	}
	return jsonValue{w.state}, nil
}

func (f *fakeTemporal) GetWorkflow(_ context.Context, workflowID, _ string) client.WorkflowRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fakeRun{state: f.workflows[workflowID].state}
}

func (f *fakeTemporal) SignalWorkflow(_ context.Context, workflowID, _, name string, arg any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failOn[workflowID]; err != nil {
		return err
	}
	if _, ok := f.workflows[workflowID]; !ok {
		return serviceerror.NewNotFound("workflow not found for ID: " + workflowID)
	}
	f.signals = append(f.signals, fakeSignal{workflowID: workflowID, name: name, action: arg.(contract.OperatorAction)})
	return nil
}

func (f *fakeTemporal) signalled() []fakeSignal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeSignal(nil), f.signals...)
}

type jsonValue struct{ v any }

func (j jsonValue) HasValue() bool { return j.v != nil }

func (j jsonValue) Get(ptr any) error {
	data, err := json.Marshal(j.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, ptr)
}

type fakeRun struct {
	client.WorkflowRun // only Get is used
	state              any
}

func (r fakeRun) Get(_ context.Context, ptr any) error { return jsonValue{r.state}.Get(ptr) }

// useFake makes the operator commands talk to f until the test ends. The
// tests that call it do not run in parallel: dialOperator is shared.
func useFake(t *testing.T, f *fakeTemporal) {
	t.Helper()
	prev := dialOperator
	dialOperator = func(config.Temporal, *zap.Logger) (operator.Temporal, func(), error) { return f, func() {}, nil }
	t.Cleanup(func() { dialOperator = prev })
}

func runWith(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), args, Env{Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader(stdin)})
	return stdout.String(), stderr.String(), err
}

// quietConfig keeps the logger out of the way.
func quietConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outpost.yaml")
	require.NoError(t, os.WriteFile(path, []byte("log:\n  level: error\ncentral:\n  temporal_ui_url: http://ui.example:8233/\n"), 0o644))
	return path
}

func TestParkedFilterQuery(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	for _, tc := range []struct {
		name    string
		filter  operator.Filter
		want    string
		wantErr string
	}{
		{name: "none", want: `OutpostStatus="Parked" AND ExecutionStatus="Running"`},
		{name: "site", filter: operator.Filter{Site: "plant-1"}, want: `OutpostStatus="Parked" AND ExecutionStatus="Running" AND OutpostSite="plant-1"`},
		{
			name:   "all",
			filter: operator.Filter{Site: "plant-1", Kind: "externalcall", Target: "erp.createOrder", OlderThan: 2 * time.Hour},
			want: `OutpostStatus="Parked" AND ExecutionStatus="Running" AND OutpostSite="plant-1" AND OutpostKind="ExternalCall"` +
				` AND OutpostTarget="erp.createOrder" AND StartTime < "2026-05-01T08:00:00Z"`,
		},
		{name: "region", filter: operator.Filter{Region: "eu", Site: "plant-1"},
			want: `OutpostStatus="Parked" AND ExecutionStatus="Running" AND OutpostSite="plant-1" AND OutpostRegion="eu"`},
		{name: "bad region", filter: operator.Filter{Region: "EU"}, wantErr: `--region "EU": want 1-63 lower-case letters, digits and '-'`},
		{name: "bad kind", filter: operator.Filter{Kind: "Email"}, wantErr: `--kind "Email": want Notification, ExternalCall, DatabaseWrite`},
		{name: "double quote", filter: operator.Filter{Site: `x" OR OutpostSite!="`}, wantErr: "quotes, backslashes"},
		{name: "single quote", filter: operator.Filter{Target: `o'neil`}, wantErr: "quotes, backslashes"},
		{name: "backslash", filter: operator.Filter{Target: `a\`}, wantErr: "quotes, backslashes"},
		{name: "newline", filter: operator.Filter{Site: "a\nb"}, wantErr: "control characters"},
		{name: "negative age", filter: operator.Filter{OlderThan: -time.Hour}, wantErr: "must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := filterQuery(tc.filter, now)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func newFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestParseInterspersed(t *testing.T) {
	t.Parallel()
	fs := newFlagSet()
	yes := fs.Bool("yes", false, "")
	reason := fs.String("reason", "", "")
	rest, err := parseInterspersed(fs, []string{"a", "--yes", "b", "--reason", "fixed it", "c", "--", "--d"})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c", "--d"}, rest)
	require.True(t, *yes)
	require.Equal(t, "fixed it", *reason)
}

func TestParkedGroupUsage(t *testing.T) {
	t.Parallel()
	out, _, err := run(t, "parked", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "parked list")
	require.Contains(t, out, "parked discard")
	_, stderr, err := run(t, "parked")
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorContains(t, err, "list, retry, discard")
	require.Contains(t, stderr, "parked retry")
	_, _, err = run(t, "parked", "requeue")
	require.ErrorIs(t, err, ErrUsage)
	require.ErrorContains(t, err, `unknown command "parked requeue"`)
	for _, name := range []string{"list", "retry", "discard"} {
		_, stderr, err := run(t, "parked", name, "--help")
		require.NoError(t, err)
		require.Contains(t, stderr, "Example:\n  outpost parked "+name)
	}
	_, stderr, err = run(t, "status", "--help")
	require.NoError(t, err)
	require.Contains(t, stderr, "Example:\n  outpost status")
}

// Refusals happen before Temporal is asked: no dial, no signal.
func TestParkedActionRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"parked", "retry"}, "needs ids, a filter (--site, --kind, --target, --older-than) or --all"},
		{[]string{"parked", "discard", "abc", "--site", "plant-1"}, "ids or a filter (or --all), not both"},
		{[]string{"parked", "retry", "--all", "--site", "plant-1"}, "drop --all"},
		{[]string{"parked", "retry", "--site", `a"b`}, "quotes, backslashes"},
		{[]string{"parked", "retry", "--kind", "Fax"}, `--kind "Fax"`},
		{[]string{"parked", "retry", "nope/abc"}, "is not an operation id"},
		{[]string{"parked", "list", "plant-1"}, "takes no arguments"},
		{[]string{"status"}, "status takes one operation ID, got 0"},
		{[]string{"status", "a", "b"}, "got 2"},
	} {
		_, _, err := run(t, tc.args...)
		require.ErrorIs(t, err, ErrUsage, "%v", tc.args)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
	}
}

func TestParkedList(t *testing.T) {
	f := newFake()
	f.addCall("c1", "plant-1", "erp.createOrder", contract.StatusParked, 3)
	f.addCall("c2", "plant-1", "erp.getOrder", contract.StatusParked, 1)
	f.addNotification("n1", "plant-1", "ops", contract.StatusParked, 2)
	f.addCall("c3", "plant-2", "erp.createOrder", contract.StatusParked, 4)
	f.addCall("c4", "plant-1", "erp.createOrder", contract.StatusDelivered, 0)
	f.addCall("c5", "plant-1", "erp.createOrder", contract.StatusRetrying, 5)
	f.listed(parkedQuery(`OutpostSite="plant-1"`), "call/c1", "call/c2", "notification/n1")
	f.listed(parkedQuery(`OutpostKind="Notification"`), "notification/n1")
	f.listed(parkedQuery(`OutpostSite="plant-9"`))
	useFake(t, f)
	cfg := quietConfig(t)

	out, _, err := runWith(t, "", "parked", "list", "--config", cfg, "--site", "plant-1", "--json")
	require.NoError(t, err)
	var items []operator.Item
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	require.Len(t, items, 3, "paged through every match (page size 2)")
	require.Equal(t, []string{"c2", "n1", "c1"}, []string{items[0].ID, items[1].ID, items[2].ID}, "oldest first")
	require.Equal(t, contract.KindNotification, items[1].Kind)
	require.Equal(t, "notification/n1", items[1].WorkflowID)
	require.Equal(t, "retries exhausted (2): dial tcp: connection refused", items[1].LastError, "decoded as NotificationState")
	require.Equal(t, "retries exhausted (3): HTTP 503 Service Unavailable", items[0].LastError, "decoded as TrackedOperation")
	require.Equal(t, 3, items[0].RetryCount)
	require.Equal(t, t0.Add(time.Minute+30*time.Second), *items[0].ParkedAt)
	require.Equal(t, t0.Add(time.Minute), items[0].ReceivedAt)

	out, _, err = runWith(t, "", "parked", "list", "--config", cfg, "--kind", "Notification")
	require.NoError(t, err)
	require.Contains(t, out, "KIND")
	require.Contains(t, out, "n1")
	require.Contains(t, out, "retries exhausted (2)")
	require.Contains(t, out, "1 parked item(s).")
	require.NotContains(t, out, "c1")

	out, _, err = runWith(t, "", "parked", "list", "--config", cfg, "--site", "plant-9")
	require.NoError(t, err)
	require.Contains(t, out, `No parked items match (OutpostStatus="Parked" AND ExecutionStatus="Running" AND OutpostSite="plant-9")`)
	out, _, err = runWith(t, "", "parked", "list", "--config", cfg, "--site", "plant-9", "--json")
	require.NoError(t, err)
	require.Equal(t, "[]\n", out, "an empty JSON array, never null")
}

func TestParkedRetryAsksBeforeBulk(t *testing.T) {
	f := newFake()
	f.addCall("c1", "plant-1", "erp.createOrder", contract.StatusParked, 1)
	f.addCall("c2", "plant-1", "erp.createOrder", contract.StatusParked, 2)
	f.addCall("c3", "plant-2", "erp.createOrder", contract.StatusParked, 3)
	f.listed(parkedQuery(`OutpostSite="plant-1"`), "call/c1", "call/c2")
	useFake(t, f)
	cfg := quietConfig(t)

	for _, answer := range []string{"n\n", "\n", "", "maybe\n"} {
		out, _, err := runWith(t, answer, "parked", "retry", "--config", cfg, "--site", "plant-1", "--operator", "ana")
		require.ErrorIs(t, err, ErrDeclined, "declining is not success")
		require.Contains(t, out, "Retry 2 parked items? [y/N] ")
		require.Contains(t, out, "c1")
		require.Contains(t, out, "Nothing signalled.")
		require.Empty(t, f.signalled(), "answer %q", answer)
	}
	out, _, err := run(t, "parked", "retry", "--config", cfg, "--site", "plant-1") // no stdin at all
	require.ErrorIs(t, err, ErrDeclined)
	require.Contains(t, out, "No answer (no input); use --yes to act without asking.")
	require.Empty(t, f.signalled())

	out, _, err = runWith(t, "y\n", "parked", "retry", "--config", cfg, "--site", "plant-1", "--operator", "ana", "--reason", "ERP is back")
	require.NoError(t, err)
	require.Contains(t, out, "Sent retry to 2 item(s) as ana; 0 skipped, 0 failed.")
	want := contract.OperatorAction{Operator: "ana", Reason: "ERP is back"}
	require.ElementsMatch(t, []fakeSignal{{"call/c1", "retry", want}, {"call/c2", "retry", want}}, f.signalled())

	// Several ids are bulk too; --yes skips the question.
	f.signals = nil
	out, _, err = runWith(t, "", "parked", "discard", "c3", "call/c1", "--config", cfg, "--operator", "bob", "--yes")
	require.NoError(t, err)
	require.NotContains(t, out, "[y/N]")
	require.Contains(t, out, "Sent discard to 2 item(s) as bob")
	require.ElementsMatch(t, []fakeSignal{{"call/c3", "discard", contract.OperatorAction{Operator: "bob"}}, {"call/c1", "discard", contract.OperatorAction{Operator: "bob"}}}, f.signalled())
}

func TestParkedRetryByID(t *testing.T) {
	f := newFake()
	f.addNotification("n1", "plant-1", "ops", contract.StatusParked, 1)
	f.addCall("c2", "plant-1", "erp.createOrder", contract.StatusDelivered, 2)
	f.addCall("c3", "plant-1", "erp.createOrder", contract.StatusRetrying, 3)
	f.addCall("c4", "plant-1", "erp.createOrder", contract.StatusParked, 4)
	useFake(t, f)
	cfg := quietConfig(t)

	// One id: no question; a bare UUID finds its kind.
	out, _, err := runWith(t, "", "parked", "retry", "n1", "--config", cfg, "--operator", "ana")
	require.NoError(t, err)
	require.NotContains(t, out, "[y/N]")
	require.Contains(t, out, "retried")
	require.Equal(t, []fakeSignal{{"notification/n1", "retry", contract.OperatorAction{Operator: "ana"}}}, f.signalled())

	// Not parked: skipped with a note, no signal; unknown: failed, non-zero exit.
	f.signals = nil
	out, _, err = runWith(t, "", "parked", "retry", "c2", "c3", "missing", "--config", cfg, "--yes")
	require.ErrorContains(t, err, "1 of 3 retry signal(s) failed")
	require.Contains(t, out, "not parked: Delivered, its workflow is completed")
	require.Contains(t, out, "not parked: Retrying")
	require.Contains(t, out, "central has no workflow for missing")
	require.Empty(t, f.signalled())

	// A failing signal is reported and makes the exit non-zero; the others still go.
	f.failOn["call/c4"] = serviceerror.NewUnavailable("frontend unavailable")
	f.addCall("c5", "plant-1", "erp.createOrder", contract.StatusParked, 5)
	f.listed(parkedQuery(), "notification/n1", "call/c4", "call/c5")
	out, _, err = runWith(t, "", "parked", "discard", "--config", cfg, "--all", "--yes")
	require.ErrorContains(t, err, "1 of 3 discard signal(s) failed")
	require.Contains(t, out, "FAILED")
	require.Contains(t, out, "frontend unavailable")
	require.Len(t, f.signalled(), 2)
}

// siteConfig is quietConfig with site.store: a site host's config.
func siteConfig(t *testing.T, store string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outpost.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "log:\n  level: error\nsite:\n  id: plant-1\n  store: %s\n", store), 0o644))
	return path
}

// What central refused for good stays parked on the site: `parked list`
// shows it beside central's (even with central away), `parked retry`
// requeues it there without asking central, and `parked discard` refuses.
func TestParkedOnTheSiteIsListedAndRequeued(t *testing.T) {
	ctx := context.Background()
	storePath := filepath.Join(t.TempDir(), "site.db")
	store, err := sitestore.Open(ctx, storePath, sitestore.Options{})
	require.NoError(t, err)
	const id = "0b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11"
	_, err = store.Enqueue(ctx, sitestore.NewMessage{ID: id, Category: contract.KindNotification, Target: "ops",
		Payload: []byte("{}"), Provenance: sitestore.Provenance{SiteID: "plant-1", Node: "node-a"}})
	require.NoError(t, err)
	require.NoError(t, store.ParkUnforwardable(ctx, id, time.Now(), "central refused it for good: Blob data size exceeds limit."))
	require.NoError(t, store.Close())

	f := newFake()
	f.addNotification("n1", "plant-1", "ops", contract.StatusParked, 2)
	f.listed(parkedQuery(), "notification/n1")
	useFake(t, f)
	cfg := siteConfig(t, storePath)

	out, _, err := runWith(t, "", "parked", "list", "--config", cfg, "--json")
	require.NoError(t, err)
	var items []operator.Item
	require.NoError(t, json.Unmarshal([]byte(out), &items))
	require.Len(t, items, 2)
	require.Equal(t, "n1", items[0].ID)
	require.Equal(t, id, items[1].ID)
	require.Equal(t, "site", items[1].ParkedOn)
	require.Contains(t, items[1].LastError, "Blob data size exceeds limit")

	out, _, err = runWith(t, "", "parked", "list", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "Parked on this site")
	require.Contains(t, out, id)

	f.listed(parkedQuery(`OutpostSite="plant-2"`))
	out, _, err = runWith(t, "", "parked", "list", "--config", cfg, "--site", "plant-2")
	require.NoError(t, err)
	require.Contains(t, out, "No parked items match", "the site filter applies to what the site holds")

	_, _, err = runWith(t, "", "parked", "discard", id, "--config", cfg)
	require.ErrorContains(t, err, "1 of 1 discard signal(s) failed")

	out, _, err = runWith(t, "", "parked", "retry", id, "--config", cfg, "--operator", "ana", "--reason", "limit raised")
	require.NoError(t, err)
	require.Contains(t, out, "requeued on this site")
	require.Empty(t, f.signalled(), "central is not asked for what it never had")

	store, err = sitestore.Open(ctx, storePath, sitestore.Options{})
	require.NoError(t, err)
	defer store.Close()
	m, err := store.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, m.Status, "due for hand-off again")
	require.Contains(t, m.LastError, "requeued on the site by ana: limit raised")
	parked, err := store.ListParkedOnSite(ctx)
	require.NoError(t, err)
	require.Empty(t, parked)
}

// --region keeps, of the operations parked on a site, those of the region
// the site's config names.
func TestParkedRegionFilterMatchesTheSitesRegion(t *testing.T) {
	t.Parallel()
	f := operator.Filter{Region: "eu"}
	require.True(t, f.Matches(operator.Item{Site: "plant-1", Region: "eu"}, time.Now()))
	require.False(t, f.Matches(operator.Item{Site: "plant-1", Region: "us"}, time.Now()))
	require.False(t, f.Matches(operator.Item{Site: "plant-1"}, time.Now()), "a site without a region is in none")
	require.True(t, operator.Filter{}.Matches(operator.Item{Region: "us"}, time.Now()))
	require.False(t, f.Empty())
}
