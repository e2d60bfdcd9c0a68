// Package cli is the outpost command: one binary, one subcommand per process
// or operator task.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/logging"
)

// Env is what a command runs with.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	// Stdin answers confirmation questions (bulk retry and discard); nil
	// reads as no answer, so nothing is done without --yes.
	Stdin io.Reader
}

type command struct {
	name    string
	summary string
	usage   string // arguments after the name
	help    string // longer text with an example
	run     func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error
}

var commands = []command{
	devCommand, centralCommand, hashPasswordCommand, siteCommand, siteStatusCommand, configCheckCommand,
	parkedListCommand, parkedRetryCommand, parkedDiscardCommand, statusCommand,
	notificationsListCommand, notificationsShowCommand, callsListCommand,
	listsLsCommand, listsShowCommand, listsSetCommand, listsAddTargetCommand, listsRemoveTargetCommand, listsRmCommand, listsApplyCommand,
	channelsLsCommand, channelsSetCommand, channelsRmCommand,
	airgapKeygenCommand, airgapExportCommand, airgapImportCommand, airgapAckCommand, airgapListCommand,
	kpiCommand, benchCommand,
}

// ErrUsage is a command line that could not be understood; a hint was printed.
var ErrUsage = errors.New("usage error")

// ErrDeclined is a confirmation answered no: nothing was done, and a script
// that asked for it must not read success.
var ErrDeclined = errors.New("not confirmed: nothing done")

// Run runs the outpost command line args (without the program name).
func Run(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printOverview(env.Stdout)
		return nil
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintln(env.Stdout, Version())
		return nil
	}
	name, rest := args[0], args[1:]
	// Two-word commands ("config check", "parked list"): the first word
	// alone names a group.
	if len(rest) > 0 && findCommand(name+" "+rest[0]) != nil {
		name, rest = name+" "+rest[0], rest[1:]
	} else if group := commandGroup(name); findCommand(name) == nil && len(group) > 0 {
		return groupUsage(env, name, group, rest)
	}
	for _, c := range commands {
		if c.name == name {
			fs := flag.NewFlagSet("outpost "+c.name, flag.ContinueOnError)
			// The flag package would print its error and the usage before
			// returning the error, which main prints again: parse returns
			// one line that says it all, and only --help prints the help.
			fs.SetOutput(io.Discard)
			fs.Usage = func() {}
			err := c.run(ctx, env, fs, rest)
			var line *usageLine
			switch {
			case errors.Is(err, flag.ErrHelp):
				printHelp(env.Stderr, c, fs)
				return nil
			case errors.Is(err, ErrUsage) && !errors.As(err, &line):
				fmt.Fprintf(env.Stderr, "Run 'outpost %s --help' for its flags and an example.\n", c.name)
			}
			return err
		}
	}
	return unknownCommand(name)
}

// usageLine is a usage error said in one line that ends with where to
// look, so nothing else is printed beside it.
type usageLine struct{ msg string }

func (e *usageLine) Error() string { return e.msg }

// Is makes a usageLine an ErrUsage (exit status 2).
func (e *usageLine) Is(target error) bool { return target == ErrUsage }

// unknownCommand names the nearest command, not the whole overview, which
// would push the mistake off the screen.
func unknownCommand(name string) error {
	var words []string
	for _, c := range commands {
		words = append(words, strings.Fields(c.name)[0])
	}
	msg := fmt.Sprintf("unknown command %q", name)
	if s := suggestion(name, append(words, "help", "version")); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return &usageLine{msg + " (outpost --help lists all)"}
}

// printHelp is a command's whole help: usage, text with an example, flags.
func printHelp(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: outpost %s %s\n\n%s\n", c.name, c.usage, strings.TrimSpace(c.help))
	if hasFlags(fs) {
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

func findCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// commandGroup lists the commands named "group ...".
func commandGroup(group string) []command {
	var out []command
	for _, c := range commands {
		if strings.HasPrefix(c.name, group+" ") {
			out = append(out, c)
		}
	}
	return out
}

// groupUsage answers a group word without a known second word: its
// commands, on stdout for --help, else on stderr with a usage error.
func groupUsage(env Env, group string, cmds []command, rest []string) error {
	help := len(rest) > 0 && (rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help")
	w := env.Stderr
	if help {
		w = env.Stdout
	}
	fmt.Fprintf(w, "Commands of outpost %s:\n", group)
	names := make([]string, 0, len(cmds))
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-21s %s\n", c.name, c.summary)
		names = append(names, strings.TrimPrefix(c.name, group+" "))
	}
	fmt.Fprintf(w, "\nRun 'outpost %s --help' for its flags and an example.\n", cmds[0].name)
	switch {
	case help:
		return nil
	case len(rest) == 0:
		return fmt.Errorf("%w: %q needs one of: %s", ErrUsage, group, strings.Join(names, ", "))
	default:
		return fmt.Errorf("%w: unknown command %q (%q takes one of: %s)", ErrUsage, group+" "+rest[0], group, strings.Join(names, ", "))
	}
}

func printOverview(w io.Writer) {
	fmt.Fprintln(w, "outpost: store-and-forward delivery for industrial sites, on Temporal.\n\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-21s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'outpost COMMAND --help' for a command's flags and an example.")
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parse parses flags: flag.ErrHelp after --help (the command stops there),
// a one-line ErrUsage for a bad flag.
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	command := strings.TrimPrefix(fs.Name(), "outpost ")
	where := fmt.Sprintf(" (outpost %s --help)", command)
	// The flag package has no error type for an unknown flag; this text is
	// the one it has always used.
	name, unknown := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !unknown {
		return &usageLine{err.Error() + where}
	}
	msg := fmt.Sprintf("unknown flag --%s for %q", name, command)
	var known []string
	fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
	if s := suggestion(name, known); s != "" {
		msg += "; did you mean --" + s + "?"
	}
	return &usageLine{msg + where}
}

// withConfig parses the --config flag, reads the file over base (no file
// means base alone), builds the logger, and runs fn. It is `outpost dev`'s:
// the other commands use withConfigOrDevStack.
func withConfig(fs *flag.FlagSet, args []string, base config.Config, flagDoc string, fn func(config.Config, *zap.Logger) error) error {
	return withLoadedConfig(fs, args, flagDoc, func(path string) (config.Config, string, error) {
		if path == "" {
			return base, "", nil
		}
		cfg, err := config.Load(path, base)
		return cfg, path, err
	}, fn)
}

// withConfigOrDevStack is withConfig over the production defaults, reading
// the dev stack's config when run beside it without --config (loadConfig).
func withConfigOrDevStack(fs *flag.FlagSet, args []string, flagDoc string, fn func(config.Config, *zap.Logger) error) error {
	return withLoadedConfig(fs, args, flagDoc, loadConfig, fn)
}

// withLoadedConfig parses the --config flag, reads the config with load,
// builds the logger, and runs fn.
func withLoadedConfig(fs *flag.FlagSet, args []string, flagDoc string, load func(path string) (config.Config, string, error), fn func(config.Config, *zap.Logger) error) error {
	path := fs.String("config", "", flagDoc)
	if err := parse(fs, args); err != nil {
		return err
	}
	// "outpost site /etc/outpost.yaml" would otherwise run on the defaults
	// (another store, another site id) without a word.
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (the config file goes after --config)", ErrUsage, fs.Arg(0))
	}
	cfg, from, err := load(*path)
	if err != nil {
		return err
	}
	log, err := logging.New(cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush
	sayDevConfig(log, *path, from)
	return fn(cfg, log)
}
