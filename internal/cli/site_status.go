package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
)

var siteStatusCommand = command{
	name:    "site status",
	summary: "the site daemon's hand-off to central, and both nodes of a site pair: who is active, epoch, lag, last failover",
	usage:   "[--config FILE] [--url URL] [--json]",
	help: `Asks the site daemon configured in --config (site.listen) whether central
is reachable and takes its hand-offs (GET /readyz: a central that refuses
them until it is set up, such as one whose namespace lacks Outpost's search
attributes, is named with what cures it), then for its pair's
state (GET /v1/pair): each node's role and epoch, the position of its copy
in the replication stream, the replication lag (changes and seconds), whether
the standby follows, when this node last heard its peer and when it last took
over. A site without site.peer runs one node: this says so.

The request carries the first token of site.api_tokens, read from its
environment variable, when any is configured. --url asks another node (or
the daemon over HTTPS under a name its certificate holds).

Example:
  outpost site status --config /etc/outpost/outpost.yaml
  outpost site status --config /etc/outpost/outpost.yaml --url http://10.0.0.12:8480 --json`,
	run: func(ctx context.Context, env Env, fs *flag.FlagSet, args []string) error {
		asJSON := fs.Bool("json", false, "print the pair's state as one JSON object")
		url := fs.String("url", "", "the site API to ask (default: from site.listen)")
		return withConfigOrDevStack(fs, args, "config `FILE` (omitted: "+devConfigDoc+")", func(cfg config.Config, _ *zap.Logger) error {
			base := *url
			if base == "" {
				base = siteAPIURL(cfg.Site)
			}
			rd, err := fetchReadiness(ctx, base)
			if err != nil {
				return err
			}
			if !*asJSON {
				fmt.Fprintf(env.Stdout, "central: %s\nhand-off: %s\n", rd.Central, rd.Handoff)
			}
			if cfg.Site.Peer.Address == "" && *url == "" {
				if *asJSON {
					return writeJSON(env.Stdout, rd)
				}
				fmt.Fprintf(env.Stdout, "site %s runs one node (%s): no site.peer is configured\n", cfg.Site.ID, cfg.Site.Node)
				return nil
			}
			st, err := fetchPairStatus(ctx, base, siteToken(cfg.Site))
			if err != nil {
				return err
			}
			if *asJSON {
				return writeJSON(env.Stdout, st)
			}
			printPairStatus(env.Stdout, st, time.Now())
			return nil
		})
	},
}

// siteAPIURL is the site API as this host reaches it: site.listen, with a
// wildcard host asked on loopback.
func siteAPIURL(s config.Site) string {
	host, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return "http://" + s.Listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "http"
	if s.TLSCertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// siteToken is the value of the first token site.api_tokens names, or "".
func siteToken(s config.Site) string {
	names := make([]string, 0, len(s.APITokens))
	for name := range s.APITokens {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if v := strings.TrimSpace(os.Getenv(s.APITokens[name])); v != "" {
			return v
		}
	}
	return ""
}

// fetchReadiness asks the site daemon's /readyz, which answers 503 with
// the same body when the site cannot take work.
func fetchReadiness(ctx context.Context, base string) (sitedaemon.Readiness, error) {
	var rd sitedaemon.Readiness
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/readyz", nil)
	if err != nil {
		return rd, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rd, fmt.Errorf("ask the site daemon at %s (is it running? --url names another): %w", base, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&rd); err != nil {
		return rd, fmt.Errorf("read the site daemon's readiness from %s (%s): %w", base, resp.Status, err)
	}
	return rd, nil
}

func fetchPairStatus(ctx context.Context, base, token string) (sitedaemon.PairStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/v1/pair", nil)
	if err != nil {
		return sitedaemon.PairStatus{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return sitedaemon.PairStatus{}, fmt.Errorf("ask the site daemon at %s (is it running? --url names another): %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return sitedaemon.PairStatus{}, fmt.Errorf("the site daemon at %s answered %s: %s", base, resp.Status, strings.TrimSpace(string(body)))
	}
	var st sitedaemon.PairStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return sitedaemon.PairStatus{}, fmt.Errorf("read the pair's state from %s: %w", base, err)
	}
	return st, nil
}

func printPairStatus(w io.Writer, st sitedaemon.PairStatus, now time.Time) {
	mode := "async"
	if st.Sync {
		mode = "sync"
	}
	fmt.Fprintf(w, "site %s, %s replication\n", st.Self.Site, mode)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tEPOCH\tPOSITION\tSEEN")
	fmt.Fprintf(tw, "%s\t%s\t%d\t%d\tthis node\n", st.Self.Node, st.Self.Role, st.Self.Epoch, st.Self.Position)
	if st.Peer.Node == "" {
		fmt.Fprintf(tw, "?\tunknown\t-\t-\tnever heard (%s)\n", st.PeerAddress)
	} else {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s ago (%s)\n", st.Peer.Node, st.Peer.Role, st.Peer.Epoch, st.Peer.Position,
			now.Sub(st.PeerSeen).Round(time.Millisecond), st.PeerAddress)
	}
	tw.Flush()
	fmt.Fprintf(w, "lag: %d changes, %.3fs", st.LagChanges, st.LagSeconds)
	if st.Self.Role == "standby" {
		if st.Following {
			fmt.Fprint(w, " (this standby follows the active node)")
		} else {
			fmt.Fprint(w, " (this standby does not follow yet: resync or hand-over in progress, or the active node is away)")
		}
	}
	fmt.Fprintln(w)
	if st.LastFailover.IsZero() {
		fmt.Fprintln(w, "last failover to this node: never")
	} else {
		fmt.Fprintf(w, "last failover to this node: %s\n", formatTime(st.LastFailover))
	}
}
