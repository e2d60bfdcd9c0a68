package cli

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/operator"
)

var parkedListCommand = command{
	name:    "parked list",
	summary: "list parked notifications, calls and writes",
	usage:   "[--config FILE] [--site S] [--kind K] [--target T] [--older-than DURATION] [--json]",
	help: `Lists the operations parked at central (waiting for an operator's retry
or discard), oldest first: kind, operation id, site, target, when central got
it, when it parked (its last attempt), retry count and last error. Filters
combine with AND. --older-than counts from when central got the operation
(its workflow started), not from when the site accepted it: an operation
buffered on its site for a day while the WAN was down is young here.

The last error comes from each operation's status query, answered by the
central worker; without one it is left out and the listing says why.
The same list is in the Temporal Web UI with the query
  OutpostStatus="Parked" AND OutpostSite="plant-1"

Example:
  outpost parked list --config /etc/outpost/outpost.yaml --site plant-1
  outpost parked list --kind ExternalCall --target erp.createOrder --older-than 2h --json`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		var f parkedFilter
		f.register(fs)
		asJSON := fs.Bool("json", false, "print a JSON array")
		op, err := loadOperator(fs, args)
		if err != nil {
			return err
		}
		defer op.close()
		if len(op.args) > 0 {
			return fmt.Errorf("%w: parked list takes no arguments, got %q (filters are flags: --site, --kind, --target, --older-than)", ErrUsage, op.args[0])
		}
		query, err := f.query(time.Now())
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		tc, closeTC, err := op.connect()
		if err != nil {
			return err
		}
		defer closeTC()
		items, err := listParked(ctx, tc, op.cfg.Temporal.Namespace, query)
		if err != nil {
			return err
		}
		addLastErrors(ctx, tc, items)
		if *asJSON {
			return writeJSON(env.Stdout, items)
		}
		if len(items) == 0 {
			fmt.Fprintf(env.Stdout, "No parked items match (%s).\n", query)
			return nil
		}
		printParked(env.Stdout, items)
		return nil
	},
}

var parkedRetryCommand = parkedActionCommand(contract.SignalRetry)

var parkedDiscardCommand = parkedActionCommand(contract.SignalDiscard)

// parkedActionCommand is `parked retry` or `parked discard`, by signal name.
func parkedActionCommand(signal string) command {
	verb, effect, example := "Retry", `Each gets signal "retry": its retry count is reset and delivery starts
again, so fix what made it park first.`, `  outpost parked retry 9b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11 --reason "relay fixed"
  outpost parked retry --site plant-1 --target erp.createOrder --operator ana --reason "ERP is back"`
	if signal == contract.SignalDiscard {
		verb, effect, example = "Discard", `Each gets signal "discard": it ends Discarded and is never delivered; its
central row is kept, and a discarded call's buffered payload is dropped on
its site.`, `  outpost parked discard call/9b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11 --reason "entered by hand"
  outpost parked discard --kind Notification --target old-list --older-than 72h --yes`
	}
	return command{
		name:    "parked " + signal,
		summary: strings.ToLower(verb) + " parked items: by id, by filter, or --all",
		usage:   "[--config FILE] [--operator NAME] [--reason TEXT] [--yes] [ID ... | --site S --kind K --target T --older-than D | --all]",
		help: verb + ` parked operations: the ids given (with or without their notification/
or call/ prefix), or every parked operation matching the filters (as for
'outpost parked list'), or with --all every parked operation. With neither
ids nor a filter nor --all it refuses.

` + effect + `
The operator (default $USER) and the reason travel with the signal and the
workflow records them.

For more than one item, or any filter, it lists what it will do and asks
before signalling ("` + verb + ` 12 parked items? [y/N]"); --yes skips the
question. An item that is not parked is skipped with a note (its workflow
would ignore the signal anyway). Exits non-zero if any signal failed.

Example:
` + example,
		run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
			a := parkedAction{signal: signal, verb: verb}
			a.filter.register(fs)
			fs.StringVar(&a.action.Operator, "operator", os.Getenv("USER"), "who is acting, recorded with the signal; defaults to $USER")
			fs.StringVar(&a.action.Reason, "reason", "", "why, recorded with the signal")
			fs.BoolVar(&a.yes, "yes", false, "do not ask before acting on several items")
			fs.BoolVar(&a.all, "all", false, "act on every parked item (when no ids and no filter are given)")
			op, err := loadOperator(fs, args)
			if err != nil {
				return err
			}
			defer op.close()
			a.ids = op.args
			if err := a.checkSelection(); err != nil {
				return err
			}
			if err := a.checkValues(); err != nil {
				return err
			}
			tc, closeTC, err := op.connect()
			if err != nil {
				return err
			}
			defer closeTC()
			return a.run(ctx, env, tc, op.cfg.Temporal.Namespace, time.Now())
		},
	}
}

// parkedFilter is the filter flags of the parked commands.
type parkedFilter struct {
	site, kind, target string
	olderThan          time.Duration
}

func (f *parkedFilter) register(fs *flag.FlagSet) {
	fs.StringVar(&f.site, "site", "", "only this site (OutpostSite)")
	fs.StringVar(&f.kind, "kind", "", "only this kind: Notification, ExternalCall or DatabaseWrite (OutpostKind)")
	fs.StringVar(&f.target, "target", "", "only this target: a notification list, system.method or database (OutpostTarget)")
	fs.DurationVar(&f.olderThan, "older-than", 0, "only items central got at least this long ago, e.g. 2h (counts from the workflow's start)")
}

func (f parkedFilter) empty() bool {
	return f.site == "" && f.kind == "" && f.target == "" && f.olderThan == 0
}

// query is the visibility query of parked operations matching f, with
// --older-than counted back from now.
func (f parkedFilter) query(now time.Time) (string, error) {
	clauses := []string{
		fmt.Sprintf("%s=%q", contract.AttrStatus.GetName(), string(contract.StatusParked)),
		// A workflow terminated while parked keeps its OutpostStatus.
		`ExecutionStatus="Running"`,
	}
	kind := f.kind
	if kind != "" {
		i := indexFold(contract.Kinds(), kind)
		if i < 0 {
			return "", fmt.Errorf("--kind %q: want %s", kind, strings.Join(contract.Kinds(), ", "))
		}
		kind = contract.Kinds()[i]
	}
	for _, c := range []struct{ flag, attr, value string }{
		{"site", contract.AttrSite.GetName(), f.site},
		{"kind", contract.AttrKind.GetName(), kind},
		{"target", contract.AttrTarget.GetName(), f.target},
	} {
		if c.value == "" {
			continue
		}
		if err := checkQueryValue(c.value); err != nil {
			return "", fmt.Errorf("--%s %q: %w", c.flag, c.value, err)
		}
		clauses = append(clauses, fmt.Sprintf("%s=%q", c.attr, c.value))
	}
	switch {
	case f.olderThan < 0:
		return "", fmt.Errorf("--older-than %s: must be positive, e.g. 2h", f.olderThan)
	case f.olderThan > 0:
		clauses = append(clauses, fmt.Sprintf("StartTime < %q", now.Add(-f.olderThan).UTC().Format(time.RFC3339)))
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

func indexFold(list []string, s string) int {
	for i, v := range list {
		if strings.EqualFold(v, s) {
			return i
		}
	}
	return -1
}

// parkedItem is one row of `parked list`.
type parkedItem struct {
	Kind       string          `json:"kind"`
	ID         string          `json:"id"`
	WorkflowID string          `json:"workflowId"`
	RunID      string          `json:"runId"`
	Site       string          `json:"site"`
	Target     string          `json:"target"`
	Status     contract.Status `json:"status"`
	// ReceivedAt is when central got it (its workflow started).
	ReceivedAt time.Time `json:"receivedAt"`
	// ParkedAt is its last attempt, from the status query.
	ParkedAt   *time.Time `json:"parkedAt,omitempty"`
	RetryCount int        `json:"retryCount"`
	LastError  string     `json:"lastError,omitempty"`
	// QueryError says why the status query gave no last error.
	QueryError string `json:"queryError,omitempty"`
}

func itemOf(ex *workflowExecution) parkedItem {
	return parkedItem{
		Kind: kindOf(ex.id, ex.sa), ID: operationID(ex.id), WorkflowID: ex.id, RunID: ex.runID,
		Site: keyword(ex.sa, contract.AttrSite), Target: keyword(ex.sa, contract.AttrTarget),
		Status: contract.Status(keyword(ex.sa, contract.AttrStatus)), ReceivedAt: ex.started,
	}
}

// listParked pages through every workflow matching query, oldest first.
func listParked(ctx context.Context, tc temporalAPI, namespace, query string) ([]parkedItem, error) {
	items := []parkedItem{}
	var token []byte
	for {
		resp, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, PageSize: 1000, NextPageToken: token, Query: query,
		})
		if err != nil {
			return nil, fmt.Errorf("list workflows (%s): %w", query, err)
		}
		for _, info := range resp.GetExecutions() {
			items = append(items, itemOf(executionOf(info)))
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

// addLastErrors fills each item's last error, retry count and park time
// from its status query. After a query times out (no central worker
// answering) the rest are not asked: each would wait as long.
func addLastErrors(ctx context.Context, tc temporalAPI, items []parkedItem) {
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
			st, err := operator.QueryState(ctx, tc, it.WorkflowID, it.RunID)
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

// printParked prints the items as a table; long errors are cut (--json has them whole).
func printParked(w io.Writer, items []parkedItem) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tSITE\tTARGET\tAT CENTRAL SINCE\tPARKED SINCE\tRETRIES\tLAST ERROR")
	for _, it := range items {
		parked := "-"
		if it.ParkedAt != nil {
			parked = formatTime(*it.ParkedAt)
		}
		lastErr := it.LastError
		if lastErr == "" && it.QueryError != "" {
			lastErr = "(unknown: status query failed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", it.Kind, it.ID, orDash(it.Site), orDash(it.Target),
			formatTime(it.ReceivedAt), parked, it.RetryCount, orDash(cut(oneLine(lastErr), 80)))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d parked item(s).\n", len(items))
	for _, it := range items {
		if it.QueryError != "" {
			fmt.Fprintf(w, "Some last errors are unknown: %s\n", it.QueryError)
			break
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func cut(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// parkedAction is one `parked retry` or `parked discard`.
type parkedAction struct {
	signal, verb string
	ids          []string
	filter       parkedFilter
	all, yes     bool
	action       contract.OperatorAction
}

// checkSelection refuses a command line that does not say which items, or
// says it twice.
func (a *parkedAction) checkSelection() error {
	cmd := "parked " + a.signal
	switch {
	case len(a.ids) > 0 && (!a.filter.empty() || a.all):
		return fmt.Errorf("%w: %s takes ids or a filter (or --all), not both: drop the ids to act on the filter's matches", ErrUsage, cmd)
	case a.all && !a.filter.empty():
		return fmt.Errorf("%w: %s --all acts on every parked item: drop --all to act on the filter's matches only", ErrUsage, cmd)
	case len(a.ids) == 0 && a.filter.empty() && !a.all:
		return fmt.Errorf("%w: %s needs ids, a filter (--site, --kind, --target, --older-than) or --all for every parked item; see 'outpost parked list'", ErrUsage, cmd)
	}
	return nil
}

// checkValues refuses an id or filter value that cannot be right.
func (a *parkedAction) checkValues() error {
	for _, id := range a.ids {
		if _, err := candidateWorkflowIDs(id); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	if _, err := a.filter.query(time.Now()); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// outcome is what happened to one id or item.
type outcome struct {
	item   parkedItem
	note   string // skipped, with why
	failed error
}

func (a *parkedAction) run(ctx context.Context, env Env, tc temporalAPI, namespace string, now time.Time) error {
	bulk := len(a.ids) == 0
	var targets []parkedItem
	var results []outcome
	if bulk {
		query, err := a.filter.query(now)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		if targets, err = listParked(ctx, tc, namespace, query); err != nil {
			return err
		}
		if len(targets) == 0 {
			fmt.Fprintf(env.Stdout, "No parked items match (%s): nothing to %s.\n", query, a.signal)
			return nil
		}
	} else {
		targets, results = a.resolveIDs(ctx, tc)
		bulk = len(targets) > 1
	}
	if len(targets) > 0 && bulk && !a.yes {
		addLastErrors(ctx, tc, targets)
		fmt.Fprintf(env.Stdout, "%s will be sent to:\n", a.signal)
		printParked(env.Stdout, targets)
		if !confirm(env, fmt.Sprintf("%s %d parked items? [y/N] ", a.verb, len(targets))) {
			fmt.Fprintln(env.Stdout, "Nothing signalled.")
			return ErrDeclined
		}
	}
	for _, it := range targets {
		err := tc.SignalWorkflow(ctx, it.WorkflowID, "", a.signal, a.action)
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			results = append(results, outcome{item: it, note: "its workflow has closed meanwhile"})
			continue
		}
		results = append(results, outcome{item: it, failed: err})
	}
	return a.report(env.Stdout, results)
}

// resolveIDs finds each id's workflow: parked ones are targets, the others
// are skipped or failed outcomes.
func (a *parkedAction) resolveIDs(ctx context.Context, tc temporalAPI) ([]parkedItem, []outcome) {
	var targets []parkedItem
	var results []outcome
	seen := map[string]bool{}
	for _, id := range a.ids {
		desc, err := describeOperation(ctx, tc, id)
		if err != nil {
			results = append(results, outcome{item: parkedItem{ID: id}, failed: err})
			continue
		}
		ex := executionOf(desc.GetWorkflowExecutionInfo())
		it := itemOf(ex)
		switch {
		case seen[ex.id]:
			continue
		case ex.closed != nil && !it.Status.Terminal() && it.Status != "":
			// Terminated (or timed out) before it finished: no signal can
			// reach it, and saying "skipped" with exit 0 would read as done.
			results = append(results, outcome{item: it, failed: fmt.Errorf("%s, but its workflow was %s: no signal can reach it; "+
				"central's reconciliation of its site discards it (Schedule reconcile/<site>, every site.reconcile_interval; trigger it to do it now)",
				it.Status, strings.ToLower(ex.status.String()))})
		case ex.closed != nil:
			results = append(results, outcome{item: it, note: fmt.Sprintf("not parked: %s, its workflow is %s", orDash(string(it.Status)), strings.ToLower(ex.status.String()))})
		case it.Status != contract.StatusParked:
			results = append(results, outcome{item: it, note: fmt.Sprintf("not parked: %s (the workflow ignores %s until it parks)", orDash(string(it.Status)), a.signal)})
		default:
			targets = append(targets, it)
		}
		seen[ex.id] = true
	}
	return targets, results
}

// confirm asks question on stdout and reads the answer from stdin: only
// y or yes is a yes.
func confirm(env Env, question string) bool {
	fmt.Fprint(env.Stdout, question)
	if env.Stdin == nil {
		fmt.Fprintln(env.Stdout, "\nNo answer (no input); use --yes to act without asking.")
		return false
	}
	answer, err := bufio.NewReader(env.Stdin).ReadString('\n')
	if err != nil && answer == "" {
		fmt.Fprintln(env.Stdout, "\nNo answer (end of input); use --yes to act without asking.")
		return false
	}
	answer = strings.ToLower(strings.TrimSpace(answer))
	return answer == "y" || answer == "yes"
}

func (a *parkedAction) report(w io.Writer, results []outcome) error {
	done := "discarded"
	if a.signal == contract.SignalRetry {
		done = "retried"
	}
	sent, skipped, failed := 0, 0, 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range results {
		it := r.item
		what := fmt.Sprintf("%s\t%s\t%s\t%s", orDash(it.Kind), it.ID, orDash(it.Site), orDash(it.Target))
		switch {
		case r.failed != nil:
			failed++
			fmt.Fprintf(tw, "FAILED\t%s\t%v\n", what, r.failed)
		case r.note != "":
			skipped++
			fmt.Fprintf(tw, "skipped\t%s\t%s\n", what, r.note)
		default:
			sent++
			fmt.Fprintf(tw, "%s\t%s\t\n", done, what)
		}
	}
	_ = tw.Flush()
	by := ""
	if a.action.Operator != "" {
		by = " as " + a.action.Operator
	}
	fmt.Fprintf(w, "Sent %s to %d item(s)%s; %d skipped, %d failed.\n", a.signal, sent, by, skipped, failed)
	if sent > 0 {
		fmt.Fprintln(w, "Follow them with 'outpost parked list' and 'outpost status ID'.")
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d %s signal(s) failed", failed, len(results), a.signal)
	}
	return nil
}
