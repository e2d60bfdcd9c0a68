package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/outpost-dev/outpost/internal/config"
)

var configCheckCommand = command{
	name:    "config check",
	summary: "report every problem in a config file",
	usage:   "FILE",
	help: `Reads FILE over the defaults and reports every problem with its path in
the file and its line, or "ok". Exits non-zero when there is a problem.

Example:
  outpost config check dev/outpost.example.yaml`,
	run: func(_ context.Context, env Env, fs *flag.FlagSet, args []string) error {
		if err := parse(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: config check takes one FILE", ErrUsage)
		}
		path := fs.Arg(0)
		if _, err := config.Load(path, config.Default()); err != nil {
			var problems config.Problems
			if errors.As(err, &problems) {
				for _, p := range problems {
					fmt.Fprintf(env.Stdout, "%s: %s\n", path, p)
				}
				return fmt.Errorf("%s: %d problem(s)", path, len(problems))
			}
			return err
		}
		fmt.Fprintf(env.Stdout, "%s: ok\n", path)
		return nil
	},
}
