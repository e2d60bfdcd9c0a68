package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outpost-dev/outpost/internal/outbox"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

var notificationsListCommand = command{
	name:    "notifications list",
	summary: "list every notification in the central store, newest first",
	usage:   "[--config FILE] [--status S] [--site S] [--list L] [--type T] [--from T] [--to T] [--q WORD] [--stuck] [--limit N] [--after TOKEN] [--json]",
	help: `Lists the notifications in the central store, whatever their status
(Delivered and Discarded too), newest first, --limit at a time (default 50).
Filters combine with AND: --status, --site, --list, --type, --from and --to
(when central got it, UTC: 2026-01-31T14:05 or 2026-01-31; from inclusive, to
exclusive), --q (a word of the subject) and --stuck (Pending or Retrying for
longer than central.stuck_age). When more match, the last line gives the
--after token of the next page. The outbox page shows the same list at
/notifications.

Example:
  outpost notifications list --config /etc/outpost/outpost.yaml --site plant-3 --q trip --from 2026-11-17
  outpost notifications list --status Delivered --limit 200 --json | jq '.notifications[].subject'`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		var f centralstore.NotificationFilter
		var pf pageFlags
		pf.register(fs, "central got")
		fs.StringVar(&f.Site, "site", "", "only this source site")
		fs.StringVar(&f.List, "list", "", "only this notification list")
		fs.StringVar(&f.Type, "type", "", "only this type: Email, Teams or Webhook")
		fs.StringVar(&f.Query, "q", "", "only those whose subject contains this `WORD`")
		fs.BoolVar(&f.StuckOnly, "stuck", false, "only Pending or Retrying ones older than central.stuck_age")
		op, err := loadOperator(fs, args)
		if err != nil {
			return err
		}
		defer op.close()
		if len(op.args) > 0 {
			return fmt.Errorf("%w: notifications list takes no arguments, got %q (filters are flags)", ErrUsage, op.args[0])
		}
		f.Limit = pf.limit
		if f.Status, f.CreatedFrom, f.CreatedTo, f.After, err = pf.window(); err != nil {
			return err
		}
		store, central, err := openCentralToRead(ctx, op.cfg, fs)
		if err != nil {
			return err
		}
		defer store.Close()
		f.Now, f.StuckAge = time.Now(), central.StuckAge
		page, err := store.ListNotifications(ctx, f)
		if errors.Is(err, centralstore.ErrInvalidFilter) {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		if err != nil {
			return err
		}
		if pf.asJSON {
			return writeJSON(env.Stdout, page)
		}
		printNotifications(env.Stdout, page)
		return nil
	},
}

var notificationsShowCommand = command{
	name:    "notifications show",
	summary: "one notification from the central store: body, targets, audit trail",
	usage:   "[--config FILE] [--json] ID",
	help: `Shows one notification as the central store has it: status, list, subject,
body, the targets its delivery resolved, where it came from, its times, and
every audit event (each attempt, operator actions with who and why). It reads
the store, so it answers for notifications whose workflows are long gone
(until central.retention purges the row). 'outpost status ID' tells the same
notification's story from its workflow.

Example:
  outpost notifications show --config /etc/outpost/outpost.yaml 9b1c6a0e-5f0d-4a43-9d43-8f1f0c2b7e11`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		asJSON := fs.Bool("json", false, "print the notification and its audit events as one JSON object")
		op, err := loadOperatorOneID(fs, args, "notifications show takes one notification ID")
		if err != nil {
			return err
		}
		defer op.close()
		id, _ := contract.NotificationIDFromWorkflowID(op.args[0])
		if id == "" {
			id = op.args[0]
		}
		if !contract.IsOperationID(id) {
			return fmt.Errorf("%w: %q is not a notification id (a lower-case UUID, with or without notification/)", ErrUsage, op.args[0])
		}
		store, _, err := openCentralToRead(ctx, op.cfg, fs)
		if err != nil {
			return err
		}
		defer store.Close()
		n, err := store.GetNotification(ctx, id)
		if err != nil {
			return err
		}
		events, err := store.ListAuditEvents(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(env.Stdout, struct {
				Notification centralstore.Notification `json:"notification"`
				Events       []centralstore.AuditEvent `json:"events"`
			}{n, events})
		}
		printNotification(env.Stdout, n, events)
		return nil
	},
}

// parseUTC reads a --from or --to time, UTC, as the outbox page does.
// pageFlags are the flags the paged lists share: --status, --from, --to,
// --limit, --after and --json.
type pageFlags struct {
	status, from, to, after string
	limit                   int
	asJSON                  bool
}

// register adds the flags to fs; when says what --from and --to count
// from ("central got", "the site made").
func (p *pageFlags) register(fs *flag.FlagSet, when string) {
	fs.StringVar(&p.status, "status", "", "only this status: "+joinStatusNames())
	fs.StringVar(&p.from, "from", "", "only those "+when+" at or after this `TIME` (UTC)")
	fs.StringVar(&p.to, "to", "", "only those "+when+" before this `TIME` (UTC)")
	fs.IntVar(&p.limit, "limit", 50, "at most `N` per page (up to 1000)")
	fs.StringVar(&p.after, "after", "", "the page after this `TOKEN` (printed at the end of the previous page)")
	fs.BoolVar(&p.asJSON, "json", false, "print the page as JSON (its next token in \"next\")")
}

// window is the page the flags ask for: status, time range and cursor;
// its errors name the flag.
func (p *pageFlags) window() (status contract.Status, from, to time.Time, after *centralstore.Cursor, err error) {
	if from, err = parseUTC("from", p.from); err != nil {
		return "", from, to, nil, err
	}
	if to, err = parseUTC("to", p.to); err != nil {
		return "", from, to, nil, err
	}
	if p.after != "" {
		c, err := centralstore.ParseCursor(p.after)
		if err != nil {
			return "", from, to, nil, fmt.Errorf("%w: --after: %v", ErrUsage, err)
		}
		after = &c
	}
	return contract.Status(p.status), from, to, after, nil
}

func parseUTC(name, v string) (time.Time, error) {
	t, err := outbox.ParseTime(name, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: --%v", ErrUsage, err)
	}
	return t, nil
}

func joinStatusNames() string {
	var names []string
	for _, s := range contract.CentralStatuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// printNotifications prints a page as a table, and how to get the next.
func printNotifications(w io.Writer, page centralstore.NotificationPage) {
	if len(page.Notifications) == 0 {
		fmt.Fprintln(w, "No notification matches.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tID\tSTATUS\tSITE\tLIST\tSUBJECT\tRETRIES\tLAST ERROR")
	for _, n := range page.Notifications {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", formatTime(n.CreatedAt), n.NotificationID, n.Status, orDash(n.SourceSiteID),
			n.ListName, cut(oneLine(n.Subject), 60), n.RetryCount, orDash(cut(oneLine(n.LastError), 60)))
	}
	_ = tw.Flush()
	if page.NextToken != "" {
		fmt.Fprintf(w, "%d shown; more match: add --after %s\n", len(page.Notifications), page.NextToken)
		return
	}
	fmt.Fprintf(w, "%d shown; that is all.\n", len(page.Notifications))
}

// printNotification prints one notification and its audit trail.
func printNotification(w io.Writer, n centralstore.Notification, events []centralstore.AuditEvent) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(label, value string) { fmt.Fprintf(tw, "%s\t%s\n", label, value) }
	line("Notification", n.NotificationID)
	line("Status", fmt.Sprintf("%s (retries %d)", n.Status, n.RetryCount))
	line("List", n.ListName+" ("+n.Type+")")
	line("Subject", oneLine(n.Subject))
	line("Resolved targets", orDash(strings.Join(n.ResolvedTargets, ", ")))
	line("Source", fmt.Sprintf("site %s, node %s, instance %s, script %s", orDash(n.SourceSiteID), orDash(n.SourceNode), orDash(n.SourceInstanceID), orDash(n.SourceScript)))
	line("Enqueued on site", formatTime(n.SiteEnqueuedAt))
	line("At central since", formatTime(n.CreatedAt))
	if n.DeliveredAt != nil {
		line("Delivered", formatTime(*n.DeliveredAt))
	}
	if n.LastError != "" {
		line("Last error", oneLine(n.LastError))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%s\n\nAudit trail:\n", n.Body)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", formatTime(e.At), e.Event, e.Status, orDash(strings.TrimSpace(e.Operator+" "+e.Reason)), oneLine(e.Detail))
	}
	if len(events) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	_ = tw.Flush()
}
