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
	usage:   "[--production [--for central|site] | --dev] FILE",
	help: `Reads FILE over the defaults and reports every problem with its path in
the file and its line, or "ok". Exits non-zero when there is a problem.

With --dev it reads FILE over the dev defaults, as "outpost dev --config FILE"
runs it: a file that changes one field of the demo system or the demo
database is whole there. Every other command reads a file over the production
defaults; beside a running dev stack, they find the config it runs with
(<dev.data_dir>/outpost.yaml) without --config.

With --production it also reports the defaults a production system must not
keep: no temporal.encryption_keys (payloads are plain text in Temporal) and
no site.api_tokens (any process on the site host may use the site API, and
the audit trail cannot name who did). --for central or --for site limits it
to the risks that process warns of at start: a central host's file needs no
site tokens.

Example:
  outpost config check dev/outpost.example.yaml
  outpost config check --dev my-dev.yaml
  outpost config check --production /etc/outpost/outpost.yaml
  outpost config check --production --for central /etc/outpost/outpost.yaml`,
	run: func(_ context.Context, env Env, fs *flag.FlagSet, args []string) error {
		production := fs.Bool("production", false, "also report the defaults production must not keep")
		dev := fs.Bool("dev", false, "read FILE over the dev defaults, as `outpost dev --config FILE` does")
		process := fs.String("for", "", "with --production, only the risks `PROCESS` (central or site) warns of at start")
		if err := parse(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("%w: config check takes one FILE", ErrUsage)
		}
		if *dev && *production {
			return fmt.Errorf("%w: --dev and --production exclude each other: production does not run on the dev defaults", ErrUsage)
		}
		risks, err := productionRisksFor(*process, *production)
		if err != nil {
			return err
		}
		path := fs.Arg(0)
		base := config.Default()
		if *dev {
			base = config.DevDefault()
		}
		cfg, err := config.Load(path, base)
		var problems config.Problems
		if err != nil && !errors.As(err, &problems) {
			return err
		}
		if err == nil && *production {
			problems = config.ProductionProblems(cfg, risks...)
		}
		for _, p := range problems {
			fmt.Fprintf(env.Stdout, "%s: %s\n", path, p)
		}
		if len(problems) > 0 {
			if _, devErr := config.Load(path, config.DevDefault()); !*dev && !*production && devErr == nil {
				fmt.Fprintf(env.Stdout, "%s: ok over the dev defaults, as `outpost dev --config` reads it: check it so with outpost config check --dev %s\n", path, path)
			}
			return fmt.Errorf("%s: %d problem(s)", path, len(problems))
		}
		fmt.Fprintf(env.Stdout, "%s: ok\n", path)
		return nil
	},
}

// productionRisksFor is the settings --for PROCESS limits --production to;
// none (every risk) without --for.
func productionRisksFor(process string, production bool) ([]string, error) {
	if process == "" {
		return nil, nil
	}
	if !production {
		return nil, fmt.Errorf("%w: --for needs --production: it limits the production risks to one process's", ErrUsage)
	}
	risks, ok := productionRisksOf[process]
	if !ok {
		return nil, fmt.Errorf("%w: --for is central or site, not %q", ErrUsage, process)
	}
	return risks, nil
}
