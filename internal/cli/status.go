package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/logging"
	"github.com/outpost-dev/outpost/internal/operator"
	"github.com/outpost-dev/outpost/internal/temporalclient"
)

var statusCommand = command{
	name:    "status",
	summary: "one operation's whole story, from central (Temporal)",
	usage:   "[--config FILE] [--json] ID",
	help: `Shows what central knows about one notification, call or write: kind,
target and site, status, retry count, last error, when the site accepted it,
when central got it, the last and next attempt, when it finished, the last
operator action, its workflow (running or closed, task queue, where its
attempts run, the attempt in progress) and a link to the Temporal Web UI
(central.temporal_ui_url). ID is the operation id, with or without its
workflow prefix (notification/ or call/).

Central only knows operations the site handed over. For any other id it says
so and exits non-zero: the operation may still be buffered on its site, or a
call may have been answered at once by the site; ask the site API
(GET /v1/operations/<id>, GET /v1/notifications/<id>). Temporal drops a
closed workflow after the namespace's retention; past it, this says not
found, while GET /v1/notifications/<id> still answers from central's
notifications table and site_calls keeps the calls (central.retention).

Example:
  outpost status --config /etc/outpost/outpost.yaml 9b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11
  outpost status --json call/9b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11 | jq .status`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		asJSON := fs.Bool("json", false, "print the story as one JSON object")
		op, err := loadOperator(fs, args)
		if err != nil {
			return err
		}
		defer op.close()
		if len(op.args) != 1 {
			return fmt.Errorf("%w: status takes one operation ID, got %d", ErrUsage, len(op.args))
		}
		if _, err := candidateWorkflowIDs(op.args[0]); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		tc, closeTC, err := op.connect()
		if err != nil {
			return err
		}
		defer closeTC()
		story, err := operationStatus(ctx, tc, op.cfg, op.args[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(env.Stdout, story)
		}
		story.print(env.Stdout)
		return nil
	},
}

// temporalAPI is the part of the Temporal client the operator commands use;
// client.Client has it, and tests put a fake in its place.
type temporalAPI interface {
	ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
	GetWorkflow(ctx context.Context, workflowID, runID string) client.WorkflowRun
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
}

// dialOperator connects an operator command to Temporal. Tests replace it.
var dialOperator = func(cfg config.Temporal, log *zap.Logger) (temporalAPI, func(), error) {
	c, err := temporalclient.Dial(cfg, log, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (check temporal.address and temporal.namespace in --config)", err)
	}
	return c, c.Close, nil
}

// operatorRun is an operator command after its flags: config, logger and
// the arguments that are not flags.
type operatorRun struct {
	cfg  config.Config
	log  *zap.Logger
	args []string
}

// loadOperator registers --config, parses flags placed anywhere among the
// arguments, reads the config over the defaults and builds the logger.
func loadOperator(fs *flag.FlagSet, args []string) (*operatorRun, error) {
	path := fs.String("config", "", "config `FILE`: temporal.* and central.temporal_ui_url are used (defaults apply when omitted)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	cfg := config.Default()
	if *path != "" {
		if cfg, err = config.Load(*path, cfg); err != nil {
			return nil, err
		}
	}
	log, err := logging.New(cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return nil, err
	}
	return &operatorRun{cfg: cfg, log: log, args: rest}, nil
}

func (o *operatorRun) connect() (temporalAPI, func(), error) {
	return dialOperator(o.cfg.Temporal, o.log)
}

func (o *operatorRun) close() { _ = o.log.Sync() }

// parseInterspersed parses flags wherever they stand ("retry ID --yes" as
// well as "retry --yes ID") and returns the other arguments in order;
// everything after "--" is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if consumed := len(args) - len(left); consumed > 0 && args[consumed-1] == "--" {
			return append(rest, left...), nil
		}
		if len(left) == 0 {
			return rest, nil
		}
		rest, args = append(rest, left[0]), left[1:]
	}
}

var (
	notificationPrefix = contract.NotificationWorkflowID("")
	callPrefix         = contract.CachedCallWorkflowID("")
)

// candidateWorkflowIDs is the workflow ids an operator's ID may name: the
// id itself when it carries its prefix, else the notification's and the
// call's (operation ids are UUIDs, so at most one exists).
func candidateWorkflowIDs(id string) ([]string, error) {
	switch {
	case strings.TrimSpace(id) == "":
		return nil, errors.New("an empty operation id")
	case strings.HasPrefix(id, notificationPrefix) || strings.HasPrefix(id, callPrefix):
		return []string{id}, nil
	case strings.ContainsAny(id, "/ \t\n"):
		return nil, fmt.Errorf("%q is not an operation id: give the UUID, %s<uuid> or %s<uuid>", id, notificationPrefix, callPrefix)
	}
	return []string{contract.NotificationWorkflowID(id), contract.CachedCallWorkflowID(id)}, nil
}

// operationID strips the workflow-id prefix.
func operationID(workflowID string) string {
	if id, ok := strings.CutPrefix(workflowID, notificationPrefix); ok {
		return id
	}
	id, _ := strings.CutPrefix(workflowID, callPrefix)
	return id
}

// notAtCentralError: central has no workflow for the operation.
type notAtCentralError struct{ id string }

func (e *notAtCentralError) Error() string {
	return fmt.Sprintf("central has no workflow for %s: it may still be buffered on its site, or was answered at once by the site (cached calls), "+
		"see GET /v1/operations/%s (calls, writes) or GET /v1/notifications/%s on the site", e.id, e.id, e.id)
}

// describeOperation finds the operation's workflow: a *notAtCentralError
// when central has none.
func describeOperation(ctx context.Context, tc temporalAPI, id string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	candidates, err := candidateWorkflowIDs(id)
	if err != nil {
		return nil, err
	}
	for _, wid := range candidates {
		desc, err := tc.DescribeWorkflowExecution(ctx, wid, "")
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("describe workflow %s: %w", wid, err)
		}
		return desc, nil
	}
	return nil, &notAtCentralError{id: operationID(candidates[0])}
}

// keyword reads a Keyword search attribute ("" when absent).
func keyword(sa *commonpb.SearchAttributes, key temporal.SearchAttributeKeyKeyword) string {
	p := sa.GetIndexedFields()[key.GetName()]
	if p == nil {
		return ""
	}
	var v string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
		return ""
	}
	return v
}

// kindOf is the operation's kind: OutpostKind, else what the id says.
func kindOf(workflowID string, sa *commonpb.SearchAttributes) string {
	if k := keyword(sa, contract.AttrKind); k != "" {
		return k
	}
	if strings.HasPrefix(workflowID, notificationPrefix) {
		return contract.KindNotification
	}
	return "call"
}

// stateOf is the operation's state: a completed workflow's result (no
// worker needed), else the status query's answer.
func stateOf(ctx context.Context, tc temporalAPI, info *workflowExecution) (operator.State, error) {
	if info.status == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		run := tc.GetWorkflow(ctx, info.id, info.runID)
		st, err := operator.DecodeState(info.id, func(v any) error { return run.Get(ctx, v) })
		if err == nil {
			return st, nil
		}
	}
	return operator.QueryState(ctx, tc, info.id, info.runID)
}

// workflowExecution is what the operator commands read of one workflow.
type workflowExecution struct {
	id, runID, typ, taskQueue string
	status                    enums.WorkflowExecutionStatus
	started                   time.Time
	closed                    *time.Time
	historyLength             int64
	sa                        *commonpb.SearchAttributes
}

func executionOf(info *workflowpb.WorkflowExecutionInfo) *workflowExecution {
	e := &workflowExecution{
		id: info.GetExecution().GetWorkflowId(), runID: info.GetExecution().GetRunId(), typ: info.GetType().GetName(),
		taskQueue: info.GetTaskQueue(), status: info.GetStatus(), historyLength: info.GetHistoryLength(), sa: info.GetSearchAttributes(),
	}
	if info.GetStartTime().IsValid() {
		e.started = info.GetStartTime().AsTime()
	}
	if info.GetCloseTime().IsValid() {
		t := info.GetCloseTime().AsTime()
		e.closed = &t
	}
	return e
}

// webUIURL links a workflow in the Temporal Web UI.
func webUIURL(base, namespace, workflowID, runID string) string {
	u := strings.TrimRight(base, "/") + "/namespaces/" + url.PathEscape(namespace) + "/workflows/" + url.PathEscape(workflowID)
	if runID != "" {
		u += "/" + url.PathEscape(runID) + "/history"
	}
	return u
}

// operationStory is `outpost status`'s answer.
type operationStory struct {
	OperationID string          `json:"operationId"`
	Kind        string          `json:"kind"`
	Status      contract.Status `json:"status"`
	Site        string          `json:"site,omitempty"`
	// Target is system.method, the database, or the notification list.
	Target     string `json:"target,omitempty"`
	Summary    string `json:"summary,omitempty"`
	RetryCount int    `json:"retryCount"`
	LastError  string `json:"lastError,omitempty"`
	// AcceptedAt is when the site accepted it; ReceivedAt when central got
	// it (its workflow started).
	AcceptedAt     *time.Time               `json:"acceptedAt,omitempty"`
	ReceivedAt     time.Time                `json:"receivedAt"`
	LastAttemptAt  *time.Time               `json:"lastAttemptAt,omitempty"`
	NextAttemptAt  *time.Time               `json:"nextAttemptAt,omitempty"`
	FinishedAt     *time.Time               `json:"finishedAt,omitempty"`
	OperatorAction *contract.OperatorAction `json:"operatorAction,omitempty"`
	// Request is what a call sends, secret params redacted.
	Request  json.RawMessage `json:"request,omitempty"`
	Workflow workflowView    `json:"workflow"`
	// AttemptsRunOn is the task queue delivery attempts run on: central's
	// for notifications, the site's for calls and writes.
	AttemptsRunOn  string       `json:"attemptsRunOn"`
	CurrentAttempt *attemptView `json:"currentAttempt,omitempty"`
	WebUI          string       `json:"webUI"`
	// Notification or Call is the full status answer; StateError says why
	// there is none.
	Notification *contract.NotificationState `json:"notification,omitempty"`
	Call         *contract.TrackedOperation  `json:"call,omitempty"`
	StateError   string                      `json:"stateError,omitempty"`
}

type workflowView struct {
	ID            string     `json:"id"`
	RunID         string     `json:"runId"`
	Type          string     `json:"type"`
	Status        string     `json:"status"`
	TaskQueue     string     `json:"taskQueue"`
	StartedAt     time.Time  `json:"startedAt"`
	ClosedAt      *time.Time `json:"closedAt,omitempty"`
	HistoryLength int64      `json:"historyLength"`
}

// attemptView is the delivery activity in progress or waiting for its next try.
type attemptView struct {
	Activity    string     `json:"activity"`
	State       string     `json:"state"`
	Attempt     int32      `json:"attempt"`
	ScheduledAt *time.Time `json:"scheduledAt,omitempty"`
	LastFailure string     `json:"lastFailure,omitempty"`
	LastWorker  string     `json:"lastWorker,omitempty"`
}

// operationStatus tells one operation's story from its workflow: the
// description, then the result or status query.
func operationStatus(ctx context.Context, tc temporalAPI, cfg config.Config, id string) (*operationStory, error) {
	desc, err := describeOperation(ctx, tc, id)
	if err != nil {
		return nil, err
	}
	info := desc.GetWorkflowExecutionInfo()
	ex := executionOf(info)
	s := &operationStory{
		OperationID: operationID(ex.id),
		Kind:        kindOf(ex.id, ex.sa),
		Status:      contract.Status(keyword(ex.sa, contract.AttrStatus)),
		Site:        keyword(ex.sa, contract.AttrSite),
		Target:      keyword(ex.sa, contract.AttrTarget),
		ReceivedAt:  ex.started,
		Workflow: workflowView{
			ID: ex.id, RunID: ex.runID, Type: ex.typ, Status: ex.status.String(), TaskQueue: ex.taskQueue,
			StartedAt: ex.started, ClosedAt: ex.closed, HistoryLength: ex.historyLength,
		},
		AttemptsRunOn: contract.CentralTaskQueue,
		WebUI:         webUIURL(cfg.Central.TemporalUIURL, cfg.Temporal.Namespace, ex.id, ex.runID),
	}
	if p := desc.GetExecutionConfig().GetUserMetadata().GetSummary(); p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &s.Summary) // a summary is a nicety
	}
	if s.Kind != contract.KindNotification && s.Site != "" {
		s.AttemptsRunOn = contract.SiteTaskQueue(s.Site)
	}
	if acts := desc.GetPendingActivities(); len(acts) > 0 {
		a := acts[0]
		s.CurrentAttempt = &attemptView{
			Activity: a.GetActivityType().GetName(), State: a.GetState().String(), Attempt: a.GetAttempt(),
			LastFailure: a.GetLastFailure().GetMessage(), LastWorker: a.GetLastWorkerIdentity(),
		}
		if a.GetScheduledTime().IsValid() {
			t := a.GetScheduledTime().AsTime()
			s.CurrentAttempt.ScheduledAt = &t
		}
	}
	st, err := stateOf(ctx, tc, ex)
	if err != nil {
		s.StateError = err.Error()
		return s, nil
	}
	s.apply(st)
	if s.FinishedAt == nil && s.Status.Terminal() {
		s.FinishedAt = ex.closed
	}
	return s, nil
}

func (s *operationStory) apply(st operator.State) {
	switch {
	case st.Notification != nil:
		n := st.Notification
		s.Notification, s.Status, s.RetryCount, s.LastError = n, n.Status, n.RetryCount, n.LastError
		s.AcceptedAt, s.LastAttemptAt, s.NextAttemptAt, s.FinishedAt = timePtr(n.SiteEnqueuedAt), n.LastAttemptAt, n.NextAttemptAt, n.DeliveredAt
		s.OperatorAction = n.LastOperatorAction
	case st.Call != nil:
		c := st.Call
		s.Call, s.Status, s.RetryCount, s.LastError = &c.TrackedOperation, c.Status, c.RetryCount, c.LastError
		s.OperatorAction, s.Request = c.LastOperatorAction, c.Request
		s.AcceptedAt, s.LastAttemptAt, s.NextAttemptAt, s.FinishedAt = timePtr(c.CreatedAt), c.LastAttemptAt, c.NextAttemptAt, c.TerminalAt
		if c.Kind != "" {
			s.Kind = c.Kind
		}
		if c.Target != "" {
			s.Target = c.Target
		}
		if c.SourceSiteID != "" {
			s.Site = c.SourceSiteID
		}
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (s *operationStory) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{label}, args...)...)
	}
	at := func(label string, t *time.Time) {
		if t != nil {
			line(label, "%s", formatTime(*t))
		}
	}
	line("Operation", "%s", s.OperationID)
	target := "target"
	if s.Kind == contract.KindNotification {
		target = "list"
	}
	line("Kind", "%s (%s %s, site %s)", s.Kind, target, orDash(s.Target), orDash(s.Site))
	if s.Summary != "" {
		line("Summary", "%s", s.Summary)
	}
	line("Status", "%s", orDash(string(s.Status)))
	line("Retry count", "%d", s.RetryCount)
	if s.LastError != "" {
		line("Last error", "%s", s.LastError)
	}
	at("Accepted", s.AcceptedAt)
	line("At central since", "%s", formatTime(s.ReceivedAt))
	at("Last attempt", s.LastAttemptAt)
	at("Next attempt", s.NextAttemptAt)
	at("Finished", s.FinishedAt)
	if a := s.OperatorAction; a != nil {
		line("Operator action", "by %s: %s", orDash(a.Operator), orDash(a.Reason))
	}
	if len(s.Request) > 0 {
		line("Request", "%s", s.Request)
	}
	wf := s.Workflow
	line("Where", "at central: workflow %s (%s), %s on task queue %s; attempts run on %s", wf.ID, wf.Type, wf.Status, wf.TaskQueue, s.AttemptsRunOn)
	if a := s.CurrentAttempt; a != nil {
		line("Current attempt", "%s attempt %d, %s%s", a.Activity, a.Attempt, strings.ToLower(a.State), suffix(", last failure: ", a.LastFailure))
	}
	if s.StateError != "" {
		line("Status query", "no answer: %s", s.StateError)
	}
	switch {
	case s.Workflow.ClosedAt != nil && s.Status != "" && !s.Status.Terminal():
		line("Next step", "none: its workflow was %s before the operation finished, so no retry or discard can reach it; "+
			"central's reconciliation of site %s discards it (Schedule reconcile/%s, every site.reconcile_interval; trigger it to do it now)",
			strings.ToLower(wf.Status), orDash(s.Site), orDash(s.Site))
	case s.Status == contract.StatusParked:
		line("Next step", "outpost parked retry %s, or outpost parked discard %s", s.OperationID, s.OperationID)
	}
	line("Web UI", "%s", s.WebUI)
	_ = tw.Flush()
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func suffix(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
