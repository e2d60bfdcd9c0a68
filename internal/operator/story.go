package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// Temporal is the part of the Temporal client the operator tools use;
// client.Client has it.
type Temporal interface {
	ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
	GetWorkflow(ctx context.Context, workflowID, runID string) client.WorkflowRun
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
}

var (
	notificationPrefix = contract.NotificationWorkflowID("")
	callPrefix         = contract.CachedCallWorkflowID("")
)

// CandidateWorkflowIDs is the workflow ids an operator's ID may name: the
// id itself when it carries its prefix, else the notification's and the
// call's (operation ids are UUIDs, so at most one exists).
func CandidateWorkflowIDs(id string) ([]string, error) {
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

// OperationID strips the workflow-id prefix.
func OperationID(workflowID string) string {
	if id, ok := strings.CutPrefix(workflowID, notificationPrefix); ok {
		return id
	}
	id, _ := strings.CutPrefix(workflowID, callPrefix)
	return id
}

// NotAtCentralError: central has no workflow for the operation.
type NotAtCentralError struct{ id string }

func (e *NotAtCentralError) Error() string {
	return fmt.Sprintf("central has no workflow for %s: it may still be buffered on its site, or was answered at once by the site (cached calls), "+
		"see GET /v1/operations/%s (calls, writes) or GET /v1/notifications/%s on the site", e.id, e.id, e.id)
}

// Describe finds the operation's workflow: a *NotAtCentralError
// when central has none.
func Describe(ctx context.Context, tc Temporal, id string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	candidates, err := CandidateWorkflowIDs(id)
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
	return nil, &NotAtCentralError{id: OperationID(candidates[0])}
}

// Keyword reads a Keyword search attribute ("" when absent).
func Keyword(sa *commonpb.SearchAttributes, key temporal.SearchAttributeKeyKeyword) string {
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

// KindOf is the operation's kind: OutpostKind, else what the id says.
func KindOf(workflowID string, sa *commonpb.SearchAttributes) string {
	if k := Keyword(sa, temporalcontract.AttrKind); k != "" {
		return k
	}
	if strings.HasPrefix(workflowID, notificationPrefix) {
		return contract.KindNotification
	}
	return "call"
}

// StateOf is the operation's state: a completed workflow's result (no
// worker needed), else the status query's answer (Discarded for a workflow
// terminated before it finished: EndedUnfinished).
func StateOf(ctx context.Context, tc Temporal, info *Execution) (State, error) {
	if info.Status == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		run := tc.GetWorkflow(ctx, info.ID, info.RunID)
		st, err := DecodeState(info.ID, func(v any) error { return run.Get(ctx, v) })
		if err == nil {
			return st, nil
		}
	}
	st, err := QueryState(ctx, tc, info.ID, info.RunID)
	if err != nil {
		return State{}, err
	}
	return EndedUnfinished(st, info.Status), nil
}

// Execution is what the operator commands read of one workflow.
type Execution struct {
	ID, RunID, Type, TaskQueue string
	Status                     enums.WorkflowExecutionStatus
	Started                    time.Time
	Closed                     *time.Time
	HistoryLength              int64
	SearchAttributes           *commonpb.SearchAttributes
}

// ExecutionOf reads what the operator tools need of a listed or described workflow.
func ExecutionOf(info *workflowpb.WorkflowExecutionInfo) *Execution {
	e := &Execution{
		ID: info.GetExecution().GetWorkflowId(), RunID: info.GetExecution().GetRunId(), Type: info.GetType().GetName(),
		TaskQueue: info.GetTaskQueue(), Status: info.GetStatus(), HistoryLength: info.GetHistoryLength(), SearchAttributes: info.GetSearchAttributes(),
	}
	if info.GetStartTime().IsValid() {
		e.Started = info.GetStartTime().AsTime()
	}
	if info.GetCloseTime().IsValid() {
		t := info.GetCloseTime().AsTime()
		e.Closed = &t
	}
	return e
}

// WebUIURL links a workflow in the Temporal Web UI.
func WebUIURL(base, namespace, workflowID, runID string) string {
	u := strings.TrimRight(base, "/") + "/namespaces/" + url.PathEscape(namespace) + "/workflows/" + url.PathEscape(workflowID)
	if runID != "" {
		u += "/" + url.PathEscape(runID) + "/history"
	}
	return u
}

// Story is `outpost status`'s answer.
type Story struct {
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
	Workflow WorkflowView    `json:"workflow"`
	// AttemptsRunOn is the task queue delivery attempts run on: central's
	// (its region's, for a region with its own queue) for notifications, the
	// site's for calls and writes.
	AttemptsRunOn  string       `json:"attemptsRunOn"`
	CurrentAttempt *AttemptView `json:"currentAttempt,omitempty"`
	WebUI          string       `json:"webUI"`
	// Notification or Call is the full status answer; StateError says why
	// there is none.
	Notification *contract.NotificationState `json:"notification,omitempty"`
	Call         *contract.TrackedOperation  `json:"call,omitempty"`
	StateError   string                      `json:"stateError,omitempty"`
}

// WorkflowView is the operation's workflow as a story shows it.
type WorkflowView struct {
	ID            string     `json:"id"`
	RunID         string     `json:"runId"`
	Type          string     `json:"type"`
	Status        string     `json:"status"`
	TaskQueue     string     `json:"taskQueue"`
	StartedAt     time.Time  `json:"startedAt"`
	ClosedAt      *time.Time `json:"closedAt,omitempty"`
	HistoryLength int64      `json:"historyLength"`
}

// AttemptView is the delivery activity in progress or waiting for its next try.
type AttemptView struct {
	Activity    string     `json:"activity"`
	State       string     `json:"state"`
	Attempt     int32      `json:"attempt"`
	ScheduledAt *time.Time `json:"scheduledAt,omitempty"`
	LastFailure string     `json:"lastFailure,omitempty"`
	LastWorker  string     `json:"lastWorker,omitempty"`
}

// StoryOf tells one operation's story from its workflow: the
// description, then the result or status query.
func StoryOf(ctx context.Context, tc Temporal, webUI, namespace, id string) (*Story, error) {
	desc, err := Describe(ctx, tc, id)
	if err != nil {
		return nil, err
	}
	info := desc.GetWorkflowExecutionInfo()
	ex := ExecutionOf(info)
	s := &Story{
		OperationID: OperationID(ex.ID),
		Kind:        KindOf(ex.ID, ex.SearchAttributes),
		Status:      shownStatus(*ex),
		Site:        Keyword(ex.SearchAttributes, temporalcontract.AttrSite),
		Target:      Keyword(ex.SearchAttributes, temporalcontract.AttrTarget),
		ReceivedAt:  ex.Started,
		Workflow: WorkflowView{
			ID: ex.ID, RunID: ex.RunID, Type: ex.Type, Status: ex.Status.String(), TaskQueue: ex.TaskQueue,
			StartedAt: ex.Started, ClosedAt: ex.Closed, HistoryLength: ex.HistoryLength,
		},
		AttemptsRunOn: centralQueueOf(*ex),
		WebUI:         WebUIURL(webUI, namespace, ex.ID, ex.RunID),
	}
	if p := desc.GetExecutionConfig().GetUserMetadata().GetSummary(); p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &s.Summary) // a summary is a nicety
	}
	if s.Kind != contract.KindNotification && s.Site != "" {
		s.AttemptsRunOn = contract.SiteTaskQueue(s.Site)
	}
	if acts := desc.GetPendingActivities(); len(acts) > 0 {
		a := acts[0]
		s.CurrentAttempt = &AttemptView{
			Activity: a.GetActivityType().GetName(), State: a.GetState().String(), Attempt: a.GetAttempt(),
			LastFailure: a.GetLastFailure().GetMessage(), LastWorker: a.GetLastWorkerIdentity(),
		}
		if a.GetScheduledTime().IsValid() {
			t := a.GetScheduledTime().AsTime()
			s.CurrentAttempt.ScheduledAt = &t
		}
	}
	st, err := StateOf(ctx, tc, ex)
	if err != nil {
		s.StateError = err.Error()
		return s, nil
	}
	s.apply(st)
	if s.FinishedAt == nil && s.Status.Terminal() {
		s.FinishedAt = ex.Closed
	}
	return s, nil
}

// centralQueueOf is the central queue a workflow's attempts run on: its
// region's own queue when it names a region and ran on that queue (regions
// sharing a namespace), else outpost-central (no region, or a region that
// is a namespace of its own).
func centralQueueOf(ex Execution) string {
	region := contract.Region{Name: Keyword(ex.SearchAttributes, temporalcontract.AttrRegion), OwnQueue: true}
	if region.Name != "" && ex.TaskQueue == region.TaskQueue() {
		return ex.TaskQueue
	}
	return contract.CentralTaskQueue
}

// shownStatus is the operation's status as its workflow's search
// attributes tell it. A workflow that completed while its OutpostStatus
// still read Pending, the site's value at start, delivered without ever
// leaving the happy path: central leaves that Delivered unannounced.
func shownStatus(ex Execution) contract.Status {
	status := contract.Status(Keyword(ex.SearchAttributes, temporalcontract.AttrStatus))
	if status == contract.StatusPending && ex.Status == enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return contract.StatusDelivered
	}
	return status
}

func (s *Story) apply(st State) {
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
