package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/outpost-dev/outpost/contract"
)

// actionCount is what one workflow's history costs: its billable actions,
// by kind, and its size.
type actionCount struct {
	total  int
	byKind map[string]int
	events int
	bytes  int
}

func (c actionCount) String() string {
	kinds := slices.Sorted(maps.Keys(c.byKind))
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, c.byKind[k])
	}
	return strings.Join(parts, ", ")
}

// countActions estimates the billable actions in a closed workflow's
// history by Temporal Cloud's list (the number Cloud bills by and a
// self-hosted cluster is sized by): the start, each signal, each activity
// attempt, the local activities of one workflow task together, each timer,
// each search-attribute upsert or properties change, each side effect.
// Workflow tasks and version markers cost none, nor does the upsert of
// TemporalChangeVersion the Go SDK makes with a version marker (Cloud
// exempts it).
func countActions(ctx context.Context, tc client.Client, workflowID string) (actionCount, error) {
	c := actionCount{byKind: map[string]int{}}
	add := func(kind string, n int) { c.byKind[kind] += n; c.total += n }
	localActivityTasks := map[int64]bool{}
	iter := tc.GetWorkflowHistory(ctx, workflowID, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return c, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		c.events++
		c.bytes += proto.Size(ev)
		switch ev.GetEventType() {
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			add("start", 1)
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			add("signal", 1)
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			add("activity attempt", int(ev.GetActivityTaskStartedEventAttributes().GetAttempt()))
		case enums.EVENT_TYPE_TIMER_STARTED:
			add("timer", 1)
		case enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			if !onlyChangeVersion(ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes()) {
				add("search-attribute upsert", 1)
			}
		case enums.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
			add("properties change", 1)
		case enums.EVENT_TYPE_MARKER_RECORDED:
			m := ev.GetMarkerRecordedEventAttributes()
			switch m.GetMarkerName() {
			case "LocalActivity":
				if task := m.GetWorkflowTaskCompletedEventId(); !localActivityTasks[task] {
					localActivityTasks[task] = true
					add("local activities of a workflow task", 1)
				}
			case "SideEffect", "MutableSideEffect":
				add("side effect", 1)
			}
		}
	}
	return c, nil
}

// actionRows counts the Temporal actions of one delivered notification and
// of one cached call delivered on its first retry, each beside the least
// the design allows, built on one bare workflow's history.
func (r *run) actionRows(ctx context.Context, e *endToEnd, box *mailbox) ([]Row, error) {
	bare, err := bareActions(ctx, e)
	if err != nil {
		return nil, err
	}
	notification, err := notificationActions(ctx, e, box, bare)
	if err != nil {
		return nil, err
	}
	call, err := callActions(ctx, e, bare)
	if err != nil {
		return nil, err
	}
	return []Row{notification, call}, nil
}

// bareActions runs one bare workflow (a start and one activity) and counts
// what its history costs.
func bareActions(ctx context.Context, e *endToEnd) (actionCount, error) {
	bareID := uuid.NewString()
	run, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "bare/" + bareID, TaskQueue: bareTaskQueue},
		BareWorkflow, BareInput{ID: bareID, Subject: benchSubject, Body: e.body})
	if err == nil {
		err = run.Get(ctx, nil)
	}
	if err != nil {
		return actionCount{}, fmt.Errorf("one bare workflow to count its actions: %w", err)
	}
	return countActions(ctx, e.tc, run.GetID())
}

// plus is c with n more actions of kind.
func (c actionCount) plus(kind string, n int) actionCount {
	out := c
	out.byKind = maps.Clone(c.byKind)
	out.byKind[kind] += n
	out.total += n
	return out
}

// changeVersionAttr is the search attribute workflow.GetVersion upserts
// (the SDK does not export its name).
const changeVersionAttr = "TemporalChangeVersion"

// onlyChangeVersion reports an upsert of TemporalChangeVersion alone: the
// one workflow.GetVersion makes.
func onlyChangeVersion(attrs *commonpb.SearchAttributes) bool {
	fields := attrs.GetIndexedFields()
	_, ok := fields[changeVersionAttr]
	return ok && len(fields) == 1
}

// notificationActions delivers one notification through the site and
// counts what its workflow's history costs. The least the design allows is
// the bare workflow's: its start and activity (the site starts the workflow
// with the submission as its input once central's workers know that start).
func notificationActions(ctx context.Context, e *endToEnd, box *mailbox, bare actionCount) (Row, error) {
	var id string
	if _, err := box.time(ctx, 1, func(ctx context.Context) error {
		var err error
		id, err = e.site.Client.Notify(ctx, benchList, benchSubject, e.body)
		return err
	}); err != nil {
		return Row{}, fmt.Errorf("one notification to count its actions: %w", err)
	}
	wid := contract.NotificationWorkflowID(id)
	if err := e.tc.GetWorkflow(ctx, wid, "").Get(ctx, nil); err != nil {
		return Row{}, fmt.Errorf("wait for %s to close: %w", wid, err)
	}
	got, err := countActions(ctx, e.tc, wid)
	if err != nil {
		return Row{}, err
	}
	row := compare(SectionEndToEnd, "Temporal actions per delivered notification", float64(got.total), "actions",
		Figure{Name: "start + 1 activity (the bare workflow's history)", Value: float64(bare.total), Unit: "actions"})
	return row.atMost(2).withDetail("%s; history %d events, %s bytes (bare workflow: %s; %d events, %s bytes)",
		got, got.events, thousands(int64(got.bytes)), bare, bare.events, thousands(int64(bare.bytes))), nil
}

// callActions makes one cached call whose immediate attempt (the site's)
// fails and whose first retry (central's) delivers it, and counts what its
// workflow's history costs. The least the design allows is the bare
// workflow's start and activity plus the timer that keeps the retry
// interval after the site's attempt (the site starts the workflow with the
// submission as its input once central's workers know that start).
func callActions(ctx context.Context, e *endToEnd, bare actionCount) (Row, error) {
	e.demo.FailNext(1, http.StatusServiceUnavailable)
	res, err := e.site.Client.Call(ctx, benchSystem, benchMethod, map[string]any{"note": "count its actions"})
	if err != nil {
		return Row{}, fmt.Errorf("one cached call to count its actions: %w", err)
	}
	if res.Status != contract.StatusPending {
		return Row{}, fmt.Errorf("cached call %s: its immediate attempt ended %s, not failed and queued", res.ID, res.Status)
	}
	wid := contract.CachedCallWorkflowID(res.ID)
	st, err := waitCallClosed(ctx, e.tc, wid)
	if err != nil {
		return Row{}, err
	}
	if st.Status != contract.StatusDelivered || st.RetryCount != 1 {
		return Row{}, fmt.Errorf("cached call %s ended %s after %d retries, not delivered on its first retry", res.ID, st.Status, st.RetryCount)
	}
	got, err := countActions(ctx, e.tc, wid)
	if err != nil {
		return Row{}, err
	}
	least := bare.plus("timer", 1)
	row := compare(SectionEndToEnd, "Temporal actions per cached call delivered on its first retry", float64(got.total), "actions",
		Figure{Name: "start + timer + 1 activity (bare history + the retry interval)", Value: float64(least.total), Unit: "actions"})
	return row.atMost(3).withDetail("%s; history %d events, %s bytes", got, got.events, thousands(int64(got.bytes))), nil
}

// waitCallClosed waits until cached call workflow wid exists (the site
// forwards it after its immediate attempt) and has closed, and returns its
// final state.
func waitCallClosed(ctx context.Context, tc client.Client, wid string) (contract.CachedCallState, error) {
	err := waitFor(ctx, drainTimeout(1), nil, func(ctx context.Context) (bool, error) {
		_, err := tc.DescribeWorkflowExecution(ctx, wid, "")
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return false, nil
		}
		return err == nil, err
	}, func() string { return "workflow " + wid + " not started" })
	if err != nil {
		return contract.CachedCallState{}, err
	}
	var st contract.CachedCallState
	if err := tc.GetWorkflow(ctx, wid, "").Get(ctx, &st); err != nil {
		return contract.CachedCallState{}, fmt.Errorf("wait for %s to close: %w", wid, err)
	}
	return st, nil
}
