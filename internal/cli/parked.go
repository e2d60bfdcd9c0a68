package cli

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/operator"
)

var parkedListCommand = command{
	name:    "parked list",
	summary: "list parked notifications, calls and writes",
	usage:   "[--config FILE] [--site S] [--kind K] [--target T] [--region R] [--older-than DURATION] [--json]",
	help: `Lists the operations parked at central (waiting for an operator's retry
or discard), oldest first: kind, operation id, site, target, when central got
it, when it parked (its last attempt), retry count and last error. Filters
combine with AND. --older-than counts from when central got the operation
(its workflow started), not from when the site accepted it: an operation
buffered on its site for a day while the WAN was down is young here.

The last error comes from each operation's status query, answered by the
central worker; without one it is left out and the listing says why.

On a site host (the config's site.store file exists) it also lists, after
central's, what is parked on the site itself: operations whose hand-off
central refused for good (over a Temporal size limit). Central never had
them; 'outpost parked retry ID' hands one off again once the cause is gone.
They are listed even when central cannot be reached.
The same list is in the Temporal Web UI with the query
  OutpostStatus="Parked" AND ExecutionStatus="Running" AND OutpostSite="plant-1"

Example:
  outpost parked list --config /etc/outpost/outpost.yaml --site plant-1
  outpost parked list --kind ExternalCall --target erp.createOrder --older-than 2h --json
  outpost parked list --region eu          # only region eu's (OutpostRegion="eu")`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		var f operator.Filter
		registerFilter(fs, &f)
		asJSON := fs.Bool("json", false, "print a JSON array")
		op, err := loadOperator(fs, args)
		if err != nil {
			return err
		}
		defer op.close()
		if len(op.args) > 0 {
			return fmt.Errorf("%w: parked list takes no arguments, got %q (filters are flags: --site, --kind, --target, --region, --older-than)", ErrUsage, op.args[0])
		}
		now := time.Now()
		query, err := filterQuery(f, now)
		if err != nil {
			return err
		}
		site, err := openParkedOnSite(ctx, op.cfg.Site)
		if err != nil {
			return err
		}
		defer site.close()
		onSite, err := site.list(ctx, f, now)
		if err != nil {
			return err
		}
		items, err := listParkedAtCentral(ctx, op, query)
		if err != nil {
			// What the site holds is listed even while central is away.
			printParkedOnSite(env.Stdout, onSite)
			return err
		}
		if *asJSON {
			return writeJSON(env.Stdout, append(items, onSite...))
		}
		if len(items)+len(onSite) == 0 {
			fmt.Fprintf(env.Stdout, "No parked items match (%s).\n", query)
			return nil
		}
		if len(items) > 0 {
			printParked(env.Stdout, items)
		}
		printParkedOnSite(env.Stdout, onSite)
		return nil
	},
}

// listParkedAtCentral lists the operations parked at central matching
// query, with their last errors.
func listParkedAtCentral(ctx context.Context, op *operatorRun, query string) ([]operator.Item, error) {
	tc, closeTC, err := op.connect()
	if err != nil {
		return nil, err
	}
	defer closeTC()
	items, err := operator.ListParked(ctx, tc, op.cfg.Temporal.Namespace, query)
	if err != nil {
		return nil, err
	}
	operator.AddLastErrors(ctx, tc, items)
	return items, nil
}

// printParkedOnSite prints the operations parked on this site, if any.
func printParkedOnSite(w io.Writer, items []operator.Item) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "\nParked on this site (central refused the hand-off for good; remove the cause, then 'outpost parked retry ID' hands it off again):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tID\tSITE\tTARGET\tACCEPTED\tPARKED SINCE\tLAST ERROR")
	for _, it := range items {
		parked := "-"
		if it.ParkedAt != nil {
			parked = formatTime(*it.ParkedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", it.Kind, it.ID, orDash(it.Site), orDash(it.Target),
			formatTime(it.ReceivedAt), parked, orDash(cut(oneLine(it.LastError), 80)))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d item(s) parked on this site.\n", len(items))
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
		usage:   "[--config FILE] [--operator NAME] [--reason TEXT] [--yes] [ID ... | --site S --kind K --target T --region R --older-than D | --all]",
		help: verb + ` parked operations: the ids given (with or without their notification/
or call/ prefix), or every parked operation matching the filters (as for
'outpost parked list'), or with --all every parked operation. With neither
ids nor a filter nor --all it refuses.

` + effect + `
The operator (default $USER) and the reason travel with the signal and the
workflow records them.

On a site host, an operation parked on the site itself (central refused its
hand-off for good; see 'outpost parked list') is retried by requeueing it
for hand-off, with the operator and reason noted on it; central is not
asked for it. It cannot be discarded.

For more than one item, or any filter, it lists what it will do and asks
before signalling ("` + verb + ` 12 parked items? [y/N]"); --yes skips the
question. An item that is not parked is skipped with a note (its workflow
would ignore the signal anyway). Exits non-zero if any signal failed.

Example:
` + example,
		run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
			a := parkedAction{signal: signal, verb: verb}
			registerFilter(fs, &a.filter)
			fs.StringVar(&a.action.Operator, "operator", defaultOperator(), "who is acting, recorded with the signal; defaults to $USER (or the account's name)")
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
			site, err := openParkedOnSite(ctx, op.cfg.Site)
			if err != nil {
				return err
			}
			defer site.close()
			return a.run(ctx, env, site, op, time.Now())
		},
	}
}

// registerFilter registers the parked commands' filter flags.
func registerFilter(fs *flag.FlagSet, f *operator.Filter) {
	fs.StringVar(&f.Site, "site", "", "only this site (OutpostSite)")
	fs.StringVar(&f.Kind, "kind", "", "only this kind: Notification, ExternalCall or DatabaseWrite (OutpostKind)")
	fs.StringVar(&f.Target, "target", "", "only this target: a notification list, system.method or database (OutpostTarget)")
	fs.StringVar(&f.Region, "region", "", "only this region's operations (OutpostRegion; docs/regions.md)")
	fs.DurationVar(&f.OlderThan, "older-than", 0, "only items central got at least this long ago, e.g. 2h (counts from the workflow's start)")
}

// filterQuery is f's visibility query; its errors name the flag.
func filterQuery(f operator.Filter, now time.Time) (string, error) {
	query, err := f.Query(now)
	if err != nil {
		return "", fmt.Errorf("%w: --%v", ErrUsage, err)
	}
	return query, nil
}

// printParked prints the items as a table; long errors are cut (--json has them whole).
func printParked(w io.Writer, items []operator.Item) {
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
	filter       operator.Filter
	all, yes     bool
	action       contract.OperatorAction
}

// checkSelection refuses a command line that does not say which items, or
// says it twice.
func (a *parkedAction) checkSelection() error {
	cmd := "parked " + a.signal
	switch {
	case len(a.ids) > 0 && (!a.filter.Empty() || a.all):
		return fmt.Errorf("%w: %s takes ids or a filter (or --all), not both: drop the ids to act on the filter's matches", ErrUsage, cmd)
	case a.all && !a.filter.Empty():
		return fmt.Errorf("%w: %s --all acts on every parked item: drop --all to act on the filter's matches only", ErrUsage, cmd)
	case len(a.ids) == 0 && a.filter.Empty() && !a.all:
		return fmt.Errorf("%w: %s needs ids, a filter (--site, --kind, --target, --older-than) or --all for every parked item; see 'outpost parked list'", ErrUsage, cmd)
	}
	return nil
}

// checkValues refuses an id or filter value that cannot be right.
func (a *parkedAction) checkValues() error {
	for _, id := range a.ids {
		if _, err := operator.CandidateWorkflowIDs(id); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	if _, err := filterQuery(a.filter, time.Now()); err != nil {
		return err
	}
	return nil
}

// run acts on the selected items: those parked on this site are requeued
// there (retry) or refused (discard); the others are signalled at central,
// which is asked only when some are left.
func (a *parkedAction) run(ctx context.Context, env Env, site *parkedOnSite, op *operatorRun, now time.Time) error {
	bulk := len(a.ids) == 0
	var onSite, targets []operator.Item
	var results []operator.Outcome
	var query string
	ids := a.ids
	var err error
	if bulk {
		if query, err = filterQuery(a.filter, now); err != nil {
			return err
		}
		onSite, err = site.list(ctx, a.filter, now)
	} else {
		onSite, ids, err = site.pick(ctx, a.ids)
	}
	if err != nil {
		return err
	}
	var tc operator.Temporal
	if bulk || len(ids) > 0 {
		var closeTC func()
		if tc, closeTC, err = op.connect(); err != nil {
			return err
		}
		defer closeTC()
		if bulk {
			targets, err = operator.ListParked(ctx, tc, op.cfg.Temporal.Namespace, query)
		} else {
			targets, results = operator.Resolve(ctx, tc, ids, a.signal)
		}
		if err != nil {
			return err
		}
	}
	if len(targets)+len(onSite) == 0 && len(results) == 0 {
		fmt.Fprintf(env.Stdout, "No parked items match (%s): nothing to %s.\n", query, a.signal)
		return nil
	}
	if n := len(targets) + len(onSite); n > 1 && !a.yes {
		if len(targets) > 0 {
			operator.AddLastErrors(ctx, tc, targets)
			fmt.Fprintf(env.Stdout, "%s will be sent to:\n", a.signal)
			printParked(env.Stdout, targets)
		}
		printParkedOnSite(env.Stdout, onSite)
		if !confirm(env, fmt.Sprintf("%s %d parked items? [y/N] ", a.verb, n)) {
			fmt.Fprintln(env.Stdout, "Nothing signalled.")
			return ErrDeclined
		}
	}
	results = append(results, a.actOnSite(ctx, site, onSite, now)...)
	if len(targets) > 0 {
		results = append(results, operator.Signal(ctx, tc, targets, a.signal, a.action)...)
	}
	return a.report(env.Stdout, results)
}

// actOnSite requeues the items parked on this site; a discard of one is
// refused: central never had it, so there is no workflow to end.
func (a *parkedAction) actOnSite(ctx context.Context, site *parkedOnSite, items []operator.Item, now time.Time) []operator.Outcome {
	if a.signal == contract.SignalRetry {
		return site.requeue(ctx, items, a.action, now)
	}
	out := make([]operator.Outcome, 0, len(items))
	for _, it := range items {
		out = append(out, operator.Outcome{Item: it, Failed: fmt.Errorf("parked on this site, never handed to central: " +
			"discard is not offered for it; remove the cause and 'outpost parked retry' it, or leave it parked")})
	}
	return out
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

func (a *parkedAction) report(w io.Writer, results []operator.Outcome) error {
	done := "discarded"
	if a.signal == contract.SignalRetry {
		done = "retried"
	}
	sent, skipped, failed := 0, 0, 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range results {
		it := r.Item
		what := fmt.Sprintf("%s\t%s\t%s\t%s", orDash(it.Kind), it.ID, orDash(it.Site), orDash(it.Target))
		switch {
		case r.Failed != nil:
			failed++
			fmt.Fprintf(tw, "FAILED\t%s\t%v\n", what, r.Failed)
		case r.Note != "":
			skipped++
			fmt.Fprintf(tw, "skipped\t%s\t%s\n", what, r.Note)
		case it.ParkedOn == "site":
			sent++
			fmt.Fprintf(tw, "requeued on this site\t%s\t\n", what)
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
