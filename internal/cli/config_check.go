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
	usage:   "[--production] FILE",
	help: `Reads FILE over the defaults and reports every problem with its path in
the file and its line, or "ok". Exits non-zero when there is a problem.

With --production it also reports the defaults a production system must not
keep: no temporal.encryption_keys (payloads are plain text in Temporal) and
no site.api_tokens (any process on the site host may use the site API, and
the audit trail cannot name who did).

Example:
  outpost config check dev/outpost.example.yaml
  outpost config check --production /etc/outpost/outpost.yaml`,
	run: func(_ context.Context, env Env, fs *flag.FlagSet, args []string) error {
		production := fs.Bool("production", false, "also report the defaults production must not keep")
		if err := parse(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: config check takes one FILE", ErrUsage)
		}
		path := fs.Arg(0)
		cfg, err := config.Load(path, config.Default())
		var problems config.Problems
		if err != nil && !errors.As(err, &problems) {
			return err
		}
		if err == nil && *production {
			problems = config.ProductionProblems(cfg)
		}
		for _, p := range problems {
			fmt.Fprintf(env.Stdout, "%s: %s\n", path, p)
		}
		if len(problems) > 0 {
			return fmt.Errorf("%s: %d problem(s)", path, len(problems))
		}
		fmt.Fprintf(env.Stdout, "%s: ok\n", path)
		return nil
	},
}
