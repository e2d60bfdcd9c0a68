package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/notification"
)

// The list and channel commands read and write the central store directly,
// as the central workers do at every delivery attempt: a change takes
// effect on the next attempt, with no restart.

var listsLsCommand = command{
	name:    "lists ls",
	summary: "the notification lists central delivers to",
	usage:   "[--config FILE] [--json]",
	help: `Lists the notification lists in the central store: type (Email, Teams,
Webhook), targets, channel and who changed each last. Central resolves a
list at every delivery attempt, so what this shows is what the next attempt
uses.

Example:
  outpost lists ls --config /etc/outpost/outpost.yaml`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		asJSON := fs.Bool("json", false, "print the lists as JSON")
		return withDefinitions(ctx, env, fs, args, 0, func(d *definitions) error {
			lists, err := d.store.Lists(ctx)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(env.Stdout, nonNil(lists))
			}
			printLists(env.Stdout, lists)
			return nil
		})
	},
}

var listsShowCommand = command{
	name:    "lists show",
	summary: "one notification list and the history of its changes",
	usage:   "[--config FILE] [--json] NAME",
	help: `Shows one list (type, targets, channel, type data, description) and every
change made to it: when, by whom, and what changed.

Example:
  outpost lists show --config /etc/outpost/outpost.yaml ops`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		asJSON := fs.Bool("json", false, "print the list and its changes as one JSON object")
		return withDefinitions(ctx, env, fs, args, 1, func(d *definitions) error {
			l, err := d.store.GetList(ctx, d.args[0])
			if err != nil {
				return err
			}
			events, err := d.store.ListAuditEvents(ctx, centralstore.ListOperationID(l.Name))
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(env.Stdout, struct {
					List    centralstore.List         `json:"list"`
					Changes []centralstore.AuditEvent `json:"changes"`
				}{l, nonNil(events)})
			}
			printList(env.Stdout, l, events)
			return nil
		})
	},
}

var listsSetCommand = command{
	name:    "lists set",
	summary: "create a notification list, or change the fields given",
	usage:   "[--config FILE] [--type T] [--target X]... [--channel C] [--type-data JSON] [--description D] [--operator WHO] NAME",
	help: `Creates the list NAME, or changes the fields given on an existing one
(targets given replace all of them). The next delivery attempt of every
notification to the list uses the change; the audit log records who made it.

Types and their targets:
  Email    email addresses; --channel may name an smtp channel (default: central.smtp)
  Teams    Teams webhook URLs; --type-data '{"style":"attention"}' colours the card
  Webhook  URLs; --channel must name a webhook channel, whose secret signs each POST;
           --type-data '{"headers":{"X-Plant":"3"}}' adds headers
A target written env:NAME is read from the central worker's environment at
delivery, so a URL carrying a secret is never stored.

Example:
  outpost lists set --type Email --target ops@plant.example --target oncall@plant.example ops
  outpost lists set --type Teams --target env:OPS_TEAMS_URL --type-data '{"style":"warning"}' ops-teams`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		var targets repeated
		typ := fs.String("type", "", "Email, Teams or Webhook (a new list: Email)")
		fs.Var(&targets, "target", "a target `X` (repeat for several); replaces all targets")
		channel := fs.String("channel", "", "the delivery channel `C` (\"-\" for none)")
		typeData := fs.String("type-data", "", "the type's fields as a JSON object")
		description := fs.String("description", "", "what the list is for")
		return withDefinitions(ctx, env, fs, args, 1, func(d *definitions) error {
			l, existed, err := d.listOrNew(ctx, d.args[0])
			if err != nil {
				return err
			}
			changed := l
			setIfGiven(&changed.Type, *typ)
			setIfGiven(&changed.TypeData, *typeData)
			setIfGiven(&changed.Description, *description)
			switch *channel {
			case "":
			case "-":
				changed.Channel = ""
			default:
				changed.Channel = *channel
			}
			if targets != nil {
				changed.Targets = targets
			}
			return d.putList(ctx, l, changed, existed)
		})
	},
}

var listsAddTargetCommand = command{
	name:    "lists add-target",
	summary: "add targets to a notification list",
	usage:   "[--config FILE] [--operator WHO] NAME TARGET...",
	help: `Adds each TARGET (an address or URL, as the list's type wants) that the
list does not have yet. The next delivery attempt uses them.

Example:
  outpost lists add-target --operator ana ops nightshift@plant.example`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		return withDefinitions(ctx, env, fs, args, -2, func(d *definitions) error {
			return d.editTargets(ctx, func(_ centralstore.List, targets []string, t string) ([]string, error) {
				if slices.Contains(targets, t) {
					return targets, nil
				}
				return append(targets, t), nil
			})
		})
	},
}

var listsRemoveTargetCommand = command{
	name:    "lists remove-target",
	summary: "remove targets from a notification list",
	usage:   "[--config FILE] [--operator WHO] NAME TARGET...",
	help: `Removes each TARGET from the list; naming one it does not have is an
error, so a typo never reads as done. A list left without targets parks its
notifications (NoRecipients) until one is added.

Example:
  outpost lists remove-target --operator ana ops old-pager@plant.example`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		return withDefinitions(ctx, env, fs, args, -2, func(d *definitions) error {
			return d.editTargets(ctx, func(l centralstore.List, targets []string, t string) ([]string, error) {
				i := slices.Index(targets, t)
				if i < 0 {
					return nil, fmt.Errorf("list %q has no target %q (it has: %s)", l.Name, t, strings.Join(l.Targets, ", "))
				}
				return slices.Delete(targets, i, i+1), nil
			})
		})
	},
}

var listsRmCommand = command{
	name:    "lists rm",
	summary: "remove a notification list",
	usage:   "[--config FILE] [--operator WHO] NAME",
	help: `Removes the list. Notifications to it park (UnknownList) until it exists
again. A list that central.lists names is created again, from the file, when
a central worker starts: remove it from the file too.

Example:
  outpost lists rm --operator ana old-shift`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		return withDefinitions(ctx, env, fs, args, 1, func(d *definitions) error {
			if err := d.store.DeleteList(ctx, d.args[0], d.operator); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "Removed list %s.\n", d.args[0])
			return nil
		})
	},
}

// definitions is a run of a list or channel command: the central store,
// who is acting and the arguments.
type definitions struct {
	env      Env
	store    *centralstore.Store
	operator string
	args     []string
}

// withDefinitions parses fs (with --config and --operator), checks the
// number of arguments (n exactly, or at least -n when negative), opens
// the central store and runs fn.
func withDefinitions(ctx context.Context, env Env, fs *flag.FlagSet, args []string, n int, fn func(*definitions) error) error {
	operator := fs.String("operator", defaultOperator(), "who is making the change, for the audit log; defaults to $USER (or the account's name)")
	op, err := loadOperator(fs, args)
	if err != nil {
		return err
	}
	defer op.close()
	if err := checkArgCount(fs.Name(), op.args, n); err != nil {
		return err
	}
	store, _, err := openCentralToRead(ctx, op.cfg, fs)
	if err != nil {
		return err
	}
	defer store.Close()
	return fn(&definitions{env: env, store: store, operator: *operator, args: op.args})
}

func checkArgCount(name string, args []string, n int) error {
	switch {
	case n >= 0 && len(args) != n:
		return fmt.Errorf("%w: %s takes %d argument(s), got %d", ErrUsage, name, n, len(args))
	case n < 0 && len(args) < -n:
		return fmt.Errorf("%w: %s takes at least %d arguments, got %d", ErrUsage, name, -n, len(args))
	}
	return nil
}

// listOrNew reads list name, or starts a new Email list of that name.
func (d *definitions) listOrNew(ctx context.Context, name string) (centralstore.List, bool, error) {
	l, err := d.store.GetList(ctx, name)
	if errors.Is(err, centralstore.ErrNotFound) {
		return centralstore.List{Name: name, Type: contract.NotificationTypeEmail, TypeData: "{}"}, false, nil
	}
	return l, err == nil, err
}

// editTargets applies edit to the targets of list args[0] once for each
// further argument, then writes the list.
func (d *definitions) editTargets(ctx context.Context, edit func(l centralstore.List, targets []string, target string) ([]string, error)) error {
	l, err := d.store.GetList(ctx, d.args[0])
	if err != nil {
		return err
	}
	changed := l
	changed.Targets = slices.Clone(l.Targets)
	for _, t := range d.args[1:] {
		if changed.Targets, err = edit(l, changed.Targets, t); err != nil {
			return err
		}
	}
	return d.putList(ctx, l, changed, true)
}

// putList writes changed (see notification.SaveList) and prints what it did.
func (d *definitions) putList(ctx context.Context, old, changed centralstore.List, existed bool) error {
	diff, err := notification.SaveList(ctx, d.store, old, changed, existed, d.operator)
	return d.report(err, "List", changed.Name, diff)
}

// report prints what a save did, or makes a refused definition a usage error.
func (d *definitions) report(err error, what, name, diff string) error {
	switch {
	case errors.Is(err, notification.ErrInvalid):
		return fmt.Errorf("%w: %v", ErrUsage, err)
	case err != nil:
		return err
	case diff == "":
		fmt.Fprintf(d.env.Stdout, "%s %s is unchanged.\n", what, name)
	default:
		fmt.Fprintf(d.env.Stdout, "%s %s: %s\n", what, name, diff)
	}
	return nil
}

func setIfGiven(field *string, v string) {
	if v != "" {
		*field = v
	}
}

// repeated is a flag given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func printLists(w io.Writer, lists []centralstore.List) {
	if len(lists) == 0 {
		fmt.Fprintln(w, "No notification lists: create one with outpost lists set.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tTARGETS\tCHANNEL\tUPDATED\tBY")
	for _, l := range lists {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Name, l.Type, orDash(cut(strings.Join(l.Targets, ", "), 80)),
			orDash(l.Channel), formatTime(l.UpdatedAt), orDash(l.UpdatedBy))
	}
	_ = tw.Flush()
}

func printList(w io.Writer, l centralstore.List, events []centralstore.AuditEvent) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(label, value string) { fmt.Fprintf(tw, "%s\t%s\n", label, value) }
	line("List", l.Name)
	line("Type", l.Type)
	line("Targets", orDash(strings.Join(l.Targets, ", ")))
	line("Channel", orDash(l.Channel))
	line("Type data", l.TypeData)
	line("Description", orDash(l.Description))
	line("Updated", formatTime(l.UpdatedAt)+" by "+orDash(l.UpdatedBy))
	_ = tw.Flush()
	printChanges(w, events)
}

// printChanges prints the audit events of a list or channel.
func printChanges(w io.Writer, events []centralstore.AuditEvent) {
	fmt.Fprintln(w, "\nChanges:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", formatTime(e.At), e.Event, orDash(e.Operator), oneLine(e.Detail))
	}
	if len(events) == 0 {
		fmt.Fprintln(tw, "(none)")
	}
	_ = tw.Flush()
}
