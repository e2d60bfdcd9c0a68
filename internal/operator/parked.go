package operator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// Filter narrows the parked operations: every field set must match.
type Filter struct {
	Site, Kind, Target string
	// Region keeps the operations of one region (OutpostRegion).
	Region string
	// OlderThan keeps operations central got at least this long ago.
	OlderThan time.Duration
}

// Empty reports whether the filter matches every parked operation.
func (f Filter) Empty() bool {
	return f.Site == "" && f.Kind == "" && f.Target == "" && f.Region == "" && f.OlderThan == 0
}

// Query is the visibility query of parked operations matching f, with
// OlderThan counted back from now. An error names the field first (kind,
// site, target, older-than), so a command can prefix its flag's dashes.
func (f Filter) Query(now time.Time) (string, error) {
	clauses := []string{
		fmt.Sprintf("%s=%q", temporalcontract.AttrStatus.GetName(), string(contract.StatusParked)),
		// A workflow terminated while parked keeps its OutpostStatus.
		`ExecutionStatus="Running"`,
	}
	kind := f.Kind
	if kind != "" {
		i := indexFold(contract.Kinds(), kind)
		if i < 0 {
			return "", fmt.Errorf("kind %q: want %s", kind, strings.Join(contract.Kinds(), ", "))
		}
		kind = contract.Kinds()[i]
	}
	if f.Region != "" {
		if err := contract.CheckRegionName(f.Region); err != nil {
			return "", err
		}
	}
	for _, c := range []struct{ flag, attr, value string }{
		{"site", temporalcontract.AttrSite.GetName(), f.Site},
		{"kind", temporalcontract.AttrKind.GetName(), kind},
		{"target", temporalcontract.AttrTarget.GetName(), f.Target},
		{"region", temporalcontract.AttrRegion.GetName(), f.Region},
	} {
		if c.value == "" {
			continue
		}
		if err := checkQueryValue(c.value); err != nil {
			return "", fmt.Errorf("%s %q: %w", c.flag, c.value, err)
		}
		clauses = append(clauses, fmt.Sprintf("%s=%q", c.attr, c.value))
	}
	switch {
	case f.OlderThan < 0:
		return "", fmt.Errorf("older-than %s: must be positive, e.g. 2h", f.OlderThan)
	case f.OlderThan > 0:
		clauses = append(clauses, fmt.Sprintf("StartTime < %q", now.Add(-f.OlderThan).UTC().Format(time.RFC3339)))
	}
	return strings.Join(clauses, " AND "), nil
}

// checkQueryValue refuses what could end or bend a quoted string in a
// visibility query; no site id, list, system or database name needs it.
func checkQueryValue(v string) error {
	for _, r := range v {
		if r == '"' || r == '\'' || r == '\\' || r == '`' || unicode.IsControl(r) {
			return fmt.Errorf("quotes, backslashes and control characters are not allowed in a filter value")
		}
	}
	return nil
}

// indexFold is the index of s in list, ignoring case; -1 when absent.
func indexFold(list []string, s string) int {
	for i, v := range list {
		if strings.EqualFold(v, s) {
			return i
		}
	}
	return -1
}

// Item is one parked operation, as `outpost parked list` prints it.
type Item struct {
	Kind       string `json:"kind"`
	ID         string `json:"id"`
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	Site       string `json:"site"`
	Target     string `json:"target"`
	// Region is the region that owns it (OutpostRegion); empty for none.
	Region string          `json:"region,omitempty"`
	Status contract.Status `json:"status"`
	// ReceivedAt is when central got it (its workflow started).
	ReceivedAt time.Time `json:"receivedAt"`
	// ParkedAt is its last attempt, from the status query.
	ParkedAt   *time.Time `json:"parkedAt,omitempty"`
	RetryCount int        `json:"retryCount"`
	LastError  string     `json:"lastError,omitempty"`
	// QueryError says why the status query gave no last error.
	QueryError string `json:"queryError,omitempty"`
	// ParkedOn is "site" for an operation parked on its site because
	// central refused its hand-off for good (ReceivedAt is then when the
	// site accepted it); empty for one parked at central.
	ParkedOn string `json:"parkedOn,omitempty"`
}

// Matches reports whether an item listed without a query (one parked on
// its site) passes the filter, OlderThan counted from ReceivedAt.
func (f Filter) Matches(it Item, now time.Time) bool {
	return (f.Site == "" || f.Site == it.Site) && (f.Kind == "" || strings.EqualFold(f.Kind, it.Kind)) && (f.Region == "" || f.Region == it.Region) &&
		(f.Target == "" || f.Target == it.Target) && (f.OlderThan <= 0 || now.Sub(it.ReceivedAt) >= f.OlderThan)
}

func ItemOf(ex *Execution) Item {
	return Item{
		Kind: KindOf(ex.ID, ex.SearchAttributes), ID: OperationID(ex.ID), WorkflowID: ex.ID, RunID: ex.RunID,
		Site: Keyword(ex.SearchAttributes, temporalcontract.AttrSite), Target: Keyword(ex.SearchAttributes, temporalcontract.AttrTarget),
		Region: Keyword(ex.SearchAttributes, temporalcontract.AttrRegion),
		Status: contract.Status(Keyword(ex.SearchAttributes, temporalcontract.AttrStatus)), ReceivedAt: ex.Started,
	}
}

// ListParked pages through every workflow matching query, oldest first.
func ListParked(ctx context.Context, tc Temporal, namespace, query string) ([]Item, error) {
	items := []Item{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, PageSize: 1000, NextPageToken: token, Query: query,
		})
		if err != nil {
			return nil, fmt.Errorf("list workflows (%s): %w", query, err)
		}
		for _, info := range resp.GetExecutions() {
			items = append(items, ItemOf(ExecutionOf(info)))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	sort.SliceStable(items, func(i, j int) bool {
		if !items[i].ReceivedAt.Equal(items[j].ReceivedAt) {
			return items[i].ReceivedAt.Before(items[j].ReceivedAt)
		}
		return items[i].ID < items[j].ID
	})
	return items, nil
}

// queryParallelism bounds the status queries in flight.
const queryParallelism = 8

// AddLastErrors fills each item's last error, retry count and park time
// from its status query. After a query times out (no central worker
// answering) the rest are not asked: each would wait as long.
func AddLastErrors(ctx context.Context, tc Temporal, items []Item) {
	var g errgroup.Group
	g.SetLimit(queryParallelism)
	var unanswered atomic.Bool
	for i := range items {
		it := &items[i]
		g.Go(func() error {
			if unanswered.Load() {
				it.QueryError = "not asked: an earlier status query got no answer (is the central worker running?)"
				return nil
			}
			st, err := QueryState(ctx, tc, it.WorkflowID, it.RunID)
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) || isDeadline(err) {
					unanswered.Store(true)
				}
				it.QueryError = err.Error()
				return nil
			}
			switch {
			case st.Notification != nil:
				it.RetryCount, it.LastError, it.ParkedAt = st.Notification.RetryCount, st.Notification.LastError, st.Notification.LastAttemptAt
			case st.Call != nil:
				it.RetryCount, it.LastError, it.ParkedAt = st.Call.RetryCount, st.Call.LastError, st.Call.LastAttemptAt
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines record their errors on the items
}

func isDeadline(err error) bool {
	var timeout *serviceerror.DeadlineExceeded
	return errors.As(err, &timeout)
}

// Resolve finds each id's workflow for signal: parked ones are targets,
// the others are skipped (Note) or failed outcomes.
func Resolve(ctx context.Context, tc Temporal, ids []string, signal string) ([]Item, []Outcome) {
	var targets []Item
	var results []Outcome
	seen := map[string]bool{}
	for _, id := range ids {
		desc, err := Describe(ctx, tc, id)
		if err != nil {
			results = append(results, Outcome{Item: Item{ID: id}, Failed: err})
			continue
		}
		ex := ExecutionOf(desc.GetWorkflowExecutionInfo())
		it := ItemOf(ex)
		switch {
		case seen[ex.ID]:
			continue
		case ex.Closed != nil && !it.Status.Terminal() && it.Status != "":
			// Terminated (or timed out) before it finished: no signal can
			// reach it, and saying "skipped" with exit 0 would read as done.
			results = append(results, Outcome{Item: it, Failed: fmt.Errorf("%s, but its workflow was %s: no signal can reach it; "+
				"central's reconciliation of its site discards it (Schedule reconcile/<site>, every site.reconcile_interval; trigger it to do it now)",
				it.Status, strings.ToLower(ex.Status.String()))})
		case ex.Closed != nil:
			results = append(results, Outcome{Item: it, Note: fmt.Sprintf("not parked: %s, its workflow is %s", statusOrNone(it.Status), strings.ToLower(ex.Status.String()))})
		case it.Status != contract.StatusParked:
			results = append(results, Outcome{Item: it, Note: fmt.Sprintf("not parked: %s (the workflow ignores %s until it parks)", statusOrNone(it.Status), signal)})
		default:
			targets = append(targets, it)
		}
		seen[ex.ID] = true
	}
	return targets, results
}

// Outcome is what happened, or would happen, to one id or item.
type Outcome struct {
	Item Item
	// Note says why it was skipped.
	Note string
	// Failed is why it could not be signalled.
	Failed error
}

// Signal sends signal with action to each item's workflow.
func Signal(ctx context.Context, tc Temporal, items []Item, signal string, action contract.OperatorAction) []Outcome {
	out := make([]Outcome, 0, len(items))
	for _, it := range items {
		err := tc.SignalWorkflow(ctx, it.WorkflowID, "", signal, action)
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			out = append(out, Outcome{Item: it, Note: "its workflow has closed meanwhile"})
			continue
		}
		out = append(out, Outcome{Item: it, Failed: err})
	}
	return out
}

// statusOrNone names a status for a note: "no status" for a workflow that
// set none.
func statusOrNone(s contract.Status) string {
	if s == "" {
		return "no status"
	}
	return string(s)
}
