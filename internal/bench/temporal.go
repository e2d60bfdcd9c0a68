package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/logging"
)

// namespace is the dev server's namespace.
const namespace = "default"

// temporalServer is a fresh Temporal dev server for one section: no
// section sees another's workflows.
type temporalServer struct {
	srv  *testsuite.DevServer
	addr string
	log  *os.File
}

// startTemporal runs the pinned dev server, its log in <name>-temporal.log.
// Its state is in memory: with a file, the server's own SQLite commits
// bound it (about 110 starts/s on 2 cores against 300 in memory) and would
// hide the site's share of every figure.
func (r *run) startTemporal(ctx context.Context, name string) (*temporalServer, error) {
	return r.startDevServer(ctx, name, "")
}

// startTemporalOnDisk is startTemporal with the server's state in
// <name>-temporal.db: in memory it keeps every workflow, about 38 KB each
// when none completes (9.8 GB after 260,000 starts), so a million would
// not fit the machine.
func (r *run) startTemporalOnDisk(ctx context.Context, name string) (*temporalServer, error) {
	return r.startDevServer(ctx, name, r.path(name+"-temporal.db"))
}

// startDevServer starts the dev server with its state in dbFile (empty: in
// memory).
func (r *run) startDevServer(ctx context.Context, name, dbFile string) (*temporalServer, error) {
	r.step("%s: starting a Temporal dev server (the first run on a machine builds the pinned CLI: about three minutes)", name)
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(r.path(name + "-temporal.log"))
	if err != nil {
		return nil, fmt.Errorf("create dev server log: %w", err)
	}
	srv, err := devserver.Start(ctx, devserver.Options{
		Address: addr, Namespace: namespace, DBFile: dbFile,
		Output: log, Logger: logging.NewTemporal(r.log.Named(name)),
	})
	if err != nil {
		log.Close()
		return nil, err
	}
	return &temporalServer{srv: srv, addr: addr, log: log}, nil
}

// client is the server's client, for the benchmark's every call.
func (t *temporalServer) client() client.Client { return t.srv.Client() }

func (t *temporalServer) stop() error {
	t.srv.Client().Close()
	return errors.Join(t.srv.Stop(), t.log.Close())
}

// pid is the dev server's process id: testsuite starts it as a child of
// this process with --port and the frontend's port.
func (t *temporalServer) pid() (int, error) {
	_, port, err := net.SplitHostPort(t.addr)
	if err != nil {
		return 0, err
	}
	return childOf("start-dev", "--port", port)
}
