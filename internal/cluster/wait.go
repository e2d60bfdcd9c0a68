package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
)

// pollEvery is how often the harness asks again while waiting.
const pollEvery = 250 * time.Millisecond

// retention is how long the namespace keeps closed workflows.
const retention = 72 * time.Hour

// awaitFrontend waits until node's frontend answers over mutual TLS.
func (c *Cluster) awaitFrontend(ctx context.Context, node int) error {
	return c.poll(ctx, fmt.Sprintf("node %d's frontend at %s to answer", node, c.nodes[node].frontend()), func() error {
		if done, err := c.nodes[node].exited(); done {
			return fmt.Errorf("%w: the server in %s exited (%v); the end of its log:\n%s", errGaveUp, c.nodes[node].root, err, c.nodes[node].logTail())
		}
		cl, err := c.dial(node)
		if err != nil {
			return err
		}
		cl.Close()
		return nil
	})
}

// Members is, for each service, the members that node's ring lists.
func (c *Cluster) Members(ctx context.Context, node int) (map[string][]string, error) {
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, c.tools.tdbg, "--address", c.nodes[node].frontend(),
		"--tls-ca-path", c.tls.CAFile, "--tls-cert-path", c.tls.CertFile, "--tls-key-path", c.tls.KeyFile,
		"--tls-server-name", c.tls.ServerName, "membership", "list-gossip")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("tdbg membership list-gossip at %s: %w: %s", c.nodes[node].frontend(), err, strings.TrimSpace(stderr.String()))
	}
	var rings []struct {
		Role    string `json:"role"`
		Members []struct {
			Identity string `json:"identity"`
		} `json:"members"`
	}
	if err := json.Unmarshal(out.Bytes(), &rings); err != nil {
		return nil, fmt.Errorf("tdbg membership list-gossip at %s: %w: %s", c.nodes[node].frontend(), err, out.String())
	}
	members := map[string][]string{}
	for _, r := range rings {
		for _, m := range r.Members {
			members[r.Role] = append(members[r.Role], m.Identity)
		}
	}
	return members, nil
}

// AwaitMembers waits until every running node's rings list n members for
// every service: the nodes see each other (or see a killed one gone).
func (c *Cluster) AwaitMembers(ctx context.Context, n int) error {
	return c.poll(ctx, fmt.Sprintf("every running node to list %d members of each service", n), func() error {
		for node := range c.nodes {
			if c.nodes[node].cmd == nil {
				continue
			}
			members, err := c.Members(ctx, node)
			if err != nil {
				return err
			}
			for _, svc := range services {
				if len(members[svc]) != n {
					return fmt.Errorf("node %d lists %d %s member(s): %v", node, len(members[svc]), svc, members[svc])
				}
			}
		}
		return nil
	})
}

// registerNamespace registers the namespace and waits until every frontend
// serves it: a frontend learns of a new namespace when its namespace cache
// refreshes, about every 10 s.
func (c *Cluster) registerNamespace(ctx context.Context) error {
	opts, err := fromconfig.TemporalOptions(c.Temporal(0, config.Default().Temporal), c.opts.Logger)
	if err != nil {
		return err
	}
	ns, err := client.NewNamespaceClient(opts)
	if err != nil {
		return fmt.Errorf("temporal cluster: namespace client: %w", err)
	}
	defer ns.Close()
	err = ns.Register(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: c.opts.Namespace, WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	if err != nil {
		return fmt.Errorf("temporal cluster: register namespace %s: %w", c.opts.Namespace, err)
	}
	for node := range c.nodes {
		err := c.poll(ctx, fmt.Sprintf("node %d to serve namespace %s", node, c.opts.Namespace), func() error {
			cl, err := c.dial(node)
			if err != nil {
				return err
			}
			defer cl.Close()
			_, err = cl.DescribeTaskQueue(ctx, "outpost-cluster-probe", enums.TASK_QUEUE_TYPE_WORKFLOW)
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) dial(node int) (client.Client, error) {
	return fromconfig.DialTemporal(c.Temporal(node, config.Default().Temporal), c.opts.Logger, nil, nil)
}

// errGaveUp marks an error that waiting longer cannot cure.
var errGaveUp = errors.New("temporal cluster")

// poll calls try until it succeeds, fails with errGaveUp, or ctx ends; the
// error then says what was awaited and the last answer.
func (c *Cluster) poll(ctx context.Context, what string, try func() error) error {
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		err := try()
		if err == nil {
			return nil
		}
		if errors.Is(err, errGaveUp) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("temporal cluster: waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-tick.C:
		}
	}
}
