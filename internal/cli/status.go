package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/logging"
	"github.com/outpost-dev/outpost/internal/operator"
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
		op, err := loadOperatorOneID(fs, args, "status takes one operation ID")
		if err != nil {
			return err
		}
		defer op.close()
		if _, err := operator.CandidateWorkflowIDs(op.args[0]); err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		tc, closeTC, err := op.connect()
		if err != nil {
			return err
		}
		defer closeTC()
		story, err := operator.StoryOf(ctx, tc, op.cfg.Central.TemporalUIURL, op.cfg.Temporal.Namespace, op.args[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(env.Stdout, story)
		}
		printStory(env.Stdout, story)
		return nil
	},
}

// dialOperator connects an operator command to Temporal. Tests replace it.
var dialOperator = func(cfg config.Temporal, log *zap.Logger) (operator.Temporal, func(), error) {
	c, err := fromconfig.DialTemporal(cfg, log, nil, nil)
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
// arguments, reads the config (loadConfig) and builds the logger.
func loadOperator(fs *flag.FlagSet, args []string) (*operatorRun, error) {
	path := fs.String("config", "", "config `FILE`: temporal.* and central.temporal_ui_url are used (omitted: "+devConfigDoc+")")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	cfg, from, err := loadConfig(*path)
	if err != nil {
		return nil, err
	}
	log, err := logging.New(cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return nil, err
	}
	sayDevConfig(log, *path, from)
	return &operatorRun{cfg: cfg, log: log, args: rest}, nil
}

// loadOperatorOneID is loadOperator for a command that takes exactly one
// ID; what says what it takes, for the usage error.
func loadOperatorOneID(fs *flag.FlagSet, args []string, what string) (*operatorRun, error) {
	op, err := loadOperator(fs, args)
	if err != nil {
		return nil, err
	}
	if len(op.args) != 1 {
		op.close()
		return nil, fmt.Errorf("%w: %s, got %d", ErrUsage, what, len(op.args))
	}
	return op, nil
}

func (o *operatorRun) connect() (operator.Temporal, func(), error) {
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

func printStory(w io.Writer, s *operator.Story) {
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
	case endedUnfinished(wf):
		line("Next step", "none: its workflow was %s before the operation finished, so it is Discarded and no retry or discard can reach it; "+
			"central's reconciliation of site %s records that (Schedule reconcile/%s, every site.reconcile_interval; trigger it to do it now)",
			strings.ToLower(wf.Status), orDash(s.Site), orDash(s.Site))
	case s.Status == contract.StatusParked:
		line("Next step", "outpost parked retry %s, or outpost parked discard %s", s.OperationID, s.OperationID)
	}
	line("Web UI", "%s", s.WebUI)
	_ = tw.Flush()
}

// endedUnfinished reports a workflow closed without running to its end:
// terminated or timed out (operator.EndedUnfinished).
func endedUnfinished(wf operator.WorkflowView) bool {
	return wf.ClosedAt != nil && (wf.Status == enums.WORKFLOW_EXECUTION_STATUS_TERMINATED.String() ||
		wf.Status == enums.WORKFLOW_EXECUTION_STATUS_TIMED_OUT.String())
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
