// Package cli is the outpost command: one binary, one subcommand per process
// or operator task.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
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
			fs.SetOutput(env.Stderr)
			// The flag package prints its one-line error and then calls
			// Usage: a mistyped flag gets that line and a hint, not the
			// whole help, which only --help prints.
			fs.Usage = func() {}
			err := c.run(ctx, env, fs, rest)
			switch {
			case errors.Is(err, flag.ErrHelp):
				printHelp(env.Stderr, c, fs)
				return nil
			case errors.Is(err, ErrUsage):
				fmt.Fprintf(env.Stderr, "Run 'outpost %s --help' for its flags and an example.\n", c.name)
			}
			return err
		}
	}
	printOverview(env.Stderr)
	return fmt.Errorf("%w: unknown command %q", ErrUsage, name)
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

// Version is the build's version: the module version and, when the binary
// was built from a checkout, its commit.
func Version() string {
	v := "outpost (devel)"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if info.Main.Version != "" {
		v = "outpost " + info.Main.Version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			v += " (commit " + s.Value + ")"
		}
	}
	return v + ", " + info.GoVersion
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
// ErrUsage for a bad flag.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	return nil
}

// withConfig parses the --config flag, reads the file over base (no file
// means base alone), builds the logger, and runs fn.
func withConfig(fs *flag.FlagSet, args []string, base config.Config, flagDoc string, fn func(config.Config, *zap.Logger) error) error {
	path := fs.String("config", "", flagDoc)
	if err := parse(fs, args); err != nil {
		return err
	}
	// "outpost site /etc/outpost.yaml" would otherwise run on the defaults
	// (another store, another site id) without a word.
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (the config file goes after --config)", ErrUsage, fs.Arg(0))
	}
	cfg := base
	if *path != "" {
		var err error
		if cfg, err = config.Load(*path, base); err != nil {
			return err
		}
	}
	log, err := logging.New(cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck // nothing to do about a failed flush
	return fn(cfg, log)
}
