// Package cluster runs a self-hosted Temporal cluster on this machine, in the
// shape of production: a throwaway PostgreSQL with Temporal's schemas, two
// server processes (every service in each) that form one cluster over
// loopback, production defaults (4 history shards, 4 task-queue partitions,
// nothing in dynamic config), the namespace registered, and mutual TLS on the
// frontend with certificates it generates. `outpost dev --cluster` and the
// cluster tests run on it.
//
// The server, its SQL schema tool and tdbg are pinned in dev/temporal-server
// and built from the Go module proxy on first use; PostgreSQL is Debian's.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/freeport"
	"github.com/outpost-dev/outpost/internal/pgserver"
)

// Nodes is how many server processes form the cluster.
const Nodes = 2

// Options says where and how to run the cluster.
type Options struct {
	// Dir holds PostgreSQL's data, each node's config and the certificates;
	// required.
	Dir string
	// Namespace is registered once the cluster runs.
	Namespace string
	// Log receives the servers' and PostgreSQL's own logs; io.Discard when nil.
	Log io.Writer
	// Logger receives the harness's progress; nop when nil.
	Logger *zap.Logger
}

// Cluster is a running cluster.
type Cluster struct {
	opts  Options
	pg    *pgserver.Server
	tools tools
	tls   TLSFiles
	nodes []*node
	// releasePorts gives back the ports reserved for the cluster.
	releasePorts []func()
	// StartupTime is how long Start took, tools already built.
	StartupTime time.Duration
}

// TLSFiles are the files a client of the frontends needs (temporal.tls_*).
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
	// ServerName is the name the frontends' certificate carries.
	ServerName string
}

// Start builds the pinned tools (minutes, the first time on a machine),
// starts PostgreSQL, applies the schemas, starts the nodes and registers the
// namespace. ctx bounds the start only; Stop ends the cluster.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" || opts.Namespace == "" {
		return nil, errors.New("temporal cluster: Options.Dir and Options.Namespace are required")
	}
	// The servers run in their own folders: every path in their configs
	// must be absolute.
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("temporal cluster: %w", err)
	}
	opts.Dir = dir
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	t, err := buildTools(ctx)
	if err != nil {
		return nil, err
	}
	begin := time.Now()
	c := &Cluster{opts: opts, tools: t}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	c.StartupTime = time.Since(begin)
	opts.Logger.Info("temporal cluster started", zap.Duration("took", c.StartupTime), zap.Strings("frontends", c.Frontends()))
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	pgPort, err := c.freePort()
	if err != nil {
		return err
	}
	pgDir := filepath.Join(c.opts.Dir, "postgres")
	if err := os.MkdirAll(pgDir, 0o755); err != nil {
		return fmt.Errorf("temporal cluster: %w", err)
	}
	if c.pg, err = pgserver.Start(ctx, pgserver.Options{Dir: pgDir, Port: pgPort, Log: c.opts.Log}); err != nil {
		return fmt.Errorf("temporal cluster: %w", err)
	}
	if err := c.applySchemas(ctx); err != nil {
		return err
	}
	if c.tls, err = writeCertificates(filepath.Join(c.opts.Dir, "tls")); err != nil {
		return err
	}
	if err := c.configureNodes(); err != nil {
		return err
	}
	// One after the other: the first server on a fresh database writes the
	// cluster's metadata, and two doing so at once make one exit.
	for i := range c.nodes {
		if err := c.nodes[i].start(c.tools.server, c.opts.Log); err != nil {
			return err
		}
		if err := c.awaitFrontend(ctx, i); err != nil {
			return err
		}
	}
	if err := c.AwaitMembers(ctx, Nodes); err != nil {
		return err
	}
	return c.registerNamespace(ctx)
}

// Frontends are the nodes' frontend addresses, node 0 first.
func (c *Cluster) Frontends() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.frontend()
	}
	return addrs
}

// TLS is what a client of the frontends needs.
func (c *Cluster) TLS() TLSFiles { return c.tls }

// Postgres is the PostgreSQL holding Temporal's databases: a caller may
// create its own database there (the central store, say), and the fault
// tests stop and restart it.
func (c *Cluster) Postgres() *pgserver.Server { return c.pg }

// ServerPIDs are the process ids of the running server processes, node 0
// first (0 for a node killed and not restarted), for reading their CPU.
func (c *Cluster) ServerPIDs() []int {
	pids := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		if n.cmd != nil {
			pids[i] = n.cmd.Process.Pid
		}
	}
	return pids
}

// Temporal is Outpost's temporal config base (its encryption keys, say)
// pointed at node's frontend: address, namespace and mutual TLS.
func (c *Cluster) Temporal(node int, base config.Temporal) config.Temporal {
	t := base
	t.Address = c.nodes[node].frontend()
	t.Namespace = c.opts.Namespace
	t.TLS = true
	t.TLSCAFile, t.TLSCertFile, t.TLSKeyFile = c.tls.CAFile, c.tls.CertFile, c.tls.KeyFile
	t.TLSServerName = c.tls.ServerName
	return t
}

// Kill ends node at once (SIGKILL), as a crash would.
func (c *Cluster) Kill(node int) error { return c.nodes[node].kill() }

// Restart starts node again after Kill and waits until its frontend answers
// and it is a member again.
func (c *Cluster) Restart(ctx context.Context, node int) error {
	if err := c.nodes[node].start(c.tools.server, c.opts.Log); err != nil {
		return err
	}
	if err := c.awaitFrontend(ctx, node); err != nil {
		return err
	}
	return c.AwaitMembers(ctx, Nodes)
}

// Stop ends every node and PostgreSQL; the data stays in Options.Dir.
func (c *Cluster) Stop() {
	for _, n := range c.nodes {
		n.stop()
	}
	if c.pg != nil {
		if err := c.pg.Stop(); err != nil {
			c.opts.Logger.Warn("temporal cluster: stop PostgreSQL", zap.Error(err))
		}
	}
	for _, release := range c.releasePorts {
		release()
	}
	c.releasePorts = nil
}

// maxMembershipPort is the highest port a membership port may have: the
// server stores it in a PostgreSQL smallint (cluster_membership.rpc_port)
// and exits at start-up on a larger one, such as any the kernel hands out
// for listen(":0").
const maxMembershipPort = 32767

// freePort reserves a loopback port for one of the cluster's servers until
// Stop (see freeport.Reserve).
func (c *Cluster) freePort() (int, error) {
	port, release, err := freeport.Reserve(maxMembershipPort + 1)
	if err != nil {
		return 0, fmt.Errorf("temporal cluster: %w", err)
	}
	c.releasePorts = append(c.releasePorts, release)
	return port, nil
}
