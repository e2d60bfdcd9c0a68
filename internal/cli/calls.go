package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/outpost-dev/outpost/internal/centralstore"
)

var callsListCommand = command{
	name:    "calls list",
	summary: "list every cached call and database write central mirrors, newest first",
	usage:   "[--config FILE] [--status S] [--kind K] [--site S] [--target T] [--from T] [--to T] [--limit N] [--after TOKEN] [--json]",
	help: `Lists the sites' cached calls and database writes as central mirrors them
(site_calls), whatever their status (Delivered, Failed and Discarded too),
newest first, --limit at a time (default 50). Filters combine with AND:
--status, --kind (ExternalCall or DatabaseWrite), --site, --target (a call's
system.method or a write's database name, exactly), --from and --to (when the
site made it, UTC: 2026-01-31T14:05 or 2026-01-31; from inclusive, to
exclusive). When more match, the last line gives the --after token of the
next page. The outbox page shows the same list at /calls, each linked to its
page (request and audit trail); 'outpost status ID' tells one's story from
its workflow.

Example:
  outpost calls list --config /etc/outpost/outpost.yaml --site plant-3 --status Failed --from 2026-11-17
  outpost calls list --kind DatabaseWrite --target historian --limit 200 --json | jq '.calls[].operationId'`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		var f centralstore.CallFilter
		var pf pageFlags
		pf.register(fs, "the site made")
		fs.StringVar(&f.Kind, "kind", "", "only this kind: ExternalCall or DatabaseWrite")
		fs.StringVar(&f.Site, "site", "", "only this source site")
		fs.StringVar(&f.Target, "target", "", "only this `TARGET`: a call's system.method or a write's database name")
		op, err := loadOperator(fs, args)
		if err != nil {
			return err
		}
		defer op.close()
		if len(op.args) > 0 {
			return fmt.Errorf("%w: calls list takes no arguments, got %q (filters are flags)", ErrUsage, op.args[0])
		}
		f.Limit = pf.limit
		if f.Status, f.CreatedFrom, f.CreatedTo, f.After, err = pf.window(); err != nil {
			return err
		}
		store, _, err := openCentralToRead(ctx, op.cfg, fs)
		if err != nil {
			return err
		}
		defer store.Close()
		page, err := store.ListCalls(ctx, f)
		if errors.Is(err, centralstore.ErrInvalidFilter) {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		if err != nil {
			return err
		}
		if pf.asJSON {
			return writeJSON(env.Stdout, page)
		}
		printCalls(env.Stdout, page)
		return nil
	},
}

// printCalls prints a page as a table, and how to get the next.
func printCalls(w io.Writer, page centralstore.CallPage) {
	if len(page.Calls) == 0 {
		fmt.Fprintln(w, "No call or write matches.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CREATED\tID\tSTATUS\tKIND\tSITE\tTARGET\tRETRIES\tLAST ERROR")
	for _, c := range page.Calls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", formatTime(c.CreatedAt), c.OperationID, c.Status, c.Kind,
			orDash(c.SourceSiteID), cut(oneLine(c.Target), 60), c.RetryCount, orDash(cut(oneLine(c.LastError), 60)))
	}
	_ = tw.Flush()
	if page.NextToken != "" {
		fmt.Fprintf(w, "%d shown; more match: add --after %s\n", len(page.Calls), page.NextToken)
		return
	}
	fmt.Fprintf(w, "%d shown; that is all.\n", len(page.Calls))
}
