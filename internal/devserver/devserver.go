// Package devserver runs the Temporal dev server from the CLI pinned in
// dev/temporal (built from the Go module proxy, never downloaded at run time).
package devserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/internal/pinned"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// toolModule is the module, relative to the repository root, that pins the CLI.
const toolModule = "dev/temporal"

// TemporalBinary returns the path of the pinned Temporal CLI, building it on
// first use (about three minutes on a 2-core machine; cached afterwards).
// OUTPOST_TEMPORAL_BIN overrides it.
func TemporalBinary(ctx context.Context) (string, error) {
	if bin := os.Getenv("OUTPOST_TEMPORAL_BIN"); bin != "" {
		return bin, nil
	}
	return pinned.Tool(ctx, toolModule, "temporal")
}

// walPragmas put a dev server's database file in write-ahead-log mode with a
// sync at each checkpoint, not at each commit. The server writes through one
// SQLite connection, and in SQLite's default mode (a rollback journal,
// synchronous=FULL) each commit syncs the disk two or three times, every other
// write waiting behind it: with 2,500 items retrying, each new hand-off took
// over a second and the site's buffer drained at 5 a second. A killed server
// process loses nothing it committed (the log is written before a commit
// returns); a power cut may lose the last commits, which is the dev server's
// to lose, not production's.
var walPragmas = []string{"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"}

// Options says how to run the dev server.
type Options struct {
	// Address is host:port of the frontend.
	Address   string
	Namespace string
	// DBFile persists the server's state; empty keeps it in memory.
	DBFile string
	// UIPort serves the Web UI; 0 runs headless.
	UIPort int
	// HTTPPort and MetricsPort serve the HTTP API and /metrics on Address's
	// host; 0: a free port the CLI picks at start (see DerivedPorts).
	HTTPPort, MetricsPort int
	// UICodecEndpoint is the codec server the Web UI decodes payloads with
	// (central's /codec); empty: none.
	UICodecEndpoint string
	// LongPoll, when set, is how long an idle poll waits for a task before
	// the server answers it empty (matching.longPollExpirationInterval, a
	// minute by default): an idle worker then polls again that often, and
	// its poller's last access time on DescribeTaskQueue moves as often.
	LongPoll time.Duration
	// Output receives the server's own log; io.Discard when nil.
	Output io.Writer
	Logger log.Logger
}

// Start runs the dev server with Outpost's search attributes registered and
// returns once it answers.
func Start(ctx context.Context, opts Options) (*testsuite.DevServer, error) {
	if err := checkFree(opts); err != nil {
		return nil, err
	}
	bin, err := TemporalBinary(ctx)
	if err != nil {
		return nil, err
	}
	out := opts.Output
	if out == nil {
		out = io.Discard
	}
	attrs := make([]temporal.SearchAttributeUpdate, 0, len(temporalcontract.SearchAttributes))
	for _, key := range temporalcontract.SearchAttributes {
		attrs = append(attrs, key.ValueSet(""))
	}
	devOpts := testsuite.DevServerOptions{
		ExistingPath:     bin,
		ClientOptions:    &client.Options{HostPort: opts.Address, Namespace: opts.Namespace, Logger: opts.Logger},
		DBFilename:       opts.DBFile,
		EnableUI:         opts.UIPort != 0,
		LogLevel:         "error",
		SearchAttributes: temporal.NewSearchAttributes(attrs...),
		Stdout:           out,
		Stderr:           out,
	}
	if opts.UIPort != 0 {
		devOpts.UIPort = strconv.Itoa(opts.UIPort)
	}
	// The CLI's dev server rereads the search attributes from its database
	// on every request that names one, so that attributes added while it
	// runs show at once. Outpost's are registered before it serves (above),
	// so the cache a production cluster keeps is right here too. Every
	// notification names four, and the rereads cost the server about a
	// tenth of its time per notification (measured with outpost bench).
	devOpts.ExtraArgs = append(devOpts.ExtraArgs, "--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false")
	if opts.DBFile != "" {
		devOpts.ExtraArgs = append(devOpts.ExtraArgs, walPragmas...)
	}
	if opts.HTTPPort != 0 {
		devOpts.ExtraArgs = append(devOpts.ExtraArgs, "--http-port", strconv.Itoa(opts.HTTPPort))
	}
	if opts.MetricsPort != 0 {
		devOpts.ExtraArgs = append(devOpts.ExtraArgs, "--metrics-port", strconv.Itoa(opts.MetricsPort))
	}
	if opts.UICodecEndpoint != "" {
		devOpts.ExtraArgs = append(devOpts.ExtraArgs, "--ui-codec-endpoint", opts.UICodecEndpoint)
	}
	if opts.LongPoll != 0 {
		devOpts.ExtraArgs = append(devOpts.ExtraArgs, "--dynamic-config-value",
			fmt.Sprintf("matching.longPollExpirationInterval=%q", opts.LongPoll.String()))
	}
	srv, err := testsuite.StartDevServer(ctx, devOpts)
	if err != nil {
		return nil, fmt.Errorf("start temporal dev server at %s: %w", opts.Address, err)
	}
	return srv, nil
}

// Ports are the ports `outpost dev` gives the dev server, derived from its
// frontend's port P so that stacks on different temporal.address ports do
// not collide: the HTTP API at P+1, /metrics at P+2 and the Web UI at
// P+1000 (the CLI's own default). Its history and matching services listen
// on two more ports the CLI picks at start (it has no flag for them).
type Ports struct{ Frontend, HTTP, Metrics, UI int }

// DerivedPorts are the Ports of a dev server whose frontend is at address.
func DerivedPorts(address string) (Ports, error) {
	_, port, err := net.SplitHostPort(address)
	if err != nil {
		return Ports{}, fmt.Errorf("temporal dev server: address %q: %w", address, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p+1000 > 65535 {
		return Ports{}, fmt.Errorf("temporal dev server: address %q needs a port from 1 to 64535 (its Web UI defaults to port + 1000)", address)
	}
	return Ports{Frontend: p, HTTP: p + 1, Metrics: p + 2, UI: p + 1000}, nil
}

// checkFree refuses to start on a port already in use: the CLI would exit
// with its complaint in a log nobody reads, and a frontend port another
// server holds would be mistaken for this one.
func checkFree(opts Options) error {
	host, port, err := net.SplitHostPort(opts.Address)
	if err != nil {
		return fmt.Errorf("temporal dev server: address %q: %w", opts.Address, err)
	}
	frontend, _ := strconv.Atoi(port)
	for _, p := range []struct {
		what string
		port int
	}{{"frontend (temporal.address)", frontend}, {"HTTP API", opts.HTTPPort}, {"metrics", opts.MetricsPort}, {"Web UI", opts.UIPort}} {
		if p.port == 0 {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p.port)))
		if err != nil {
			return fmt.Errorf("temporal dev server: its %s port %d on %s is in use (another stack?): "+
				"give each stack its own temporal.address port, its ports +1, +2 and +1000 free too: %w", p.what, p.port, host, err)
		}
		ln.Close()
	}
	return nil
}
