package cluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"text/template"
	"time"
)

// node is one server process running every service.
type node struct {
	root string
	// ports, by service: gRPC and membership.
	ports map[string]servicePorts
	cmd   *exec.Cmd
	done  chan error
}

type servicePorts struct{ GRPC, Membership int }

// services are the services every node runs.
var services = []string{"frontend", "history", "matching", "worker"}

// configEnv is the server's -e: it reads ROOT/config/<configEnv>.yaml.
const configEnv = "cluster"

func (n *node) frontend() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.ports["frontend"].GRPC))
}

// configureNodes picks each node's ports and writes its config.
func (c *Cluster) configureNodes() error {
	c.nodes = make([]*node, Nodes)
	for i := range c.nodes {
		n := &node{root: filepath.Join(c.opts.Dir, "node"+strconv.Itoa(i)), ports: map[string]servicePorts{}}
		for _, svc := range services {
			grpc, err := c.freePort()
			if err != nil {
				return err
			}
			membership, err := c.freePort()
			if err != nil {
				return err
			}
			n.ports[svc] = servicePorts{GRPC: grpc, Membership: membership}
		}
		c.nodes[i] = n
	}
	for _, n := range c.nodes {
		if err := c.writeConfig(n); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) writeConfig(n *node) error {
	dir := filepath.Join(n.root, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("temporal cluster: node config: %w", err)
	}
	path := filepath.Join(dir, configEnv+".yaml")
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("temporal cluster: node config: %w", err)
	}
	err = nodeConfig.Execute(f, map[string]any{
		"PG": c.pg, "Stores": map[string]string{"default": "temporal", "visibility": "temporal_visibility"}, "TLS": c.tls, "TLSDir": filepath.Dir(c.tls.CAFile), "Ports": n.ports,
		// Every node names the first node's frontend as the cluster's
		// address: it is only used for replication, which a single
		// cluster does not do.
		"ClusterAddress": c.nodes[0].frontend(),
	})
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("temporal cluster: write %s: %w", path, err)
	}
	return nil
}

// nodeConfig is a node's server config: production defaults, so nothing in
// dynamic config (task queues get 4 partitions) and 4 history shards.
var nodeConfig = template.Must(template.New("node").Parse(`log:
  stdout: true
  level: error
persistence:
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: 4
  datastores:
{{- range $store, $db := .Stores}}
    {{$store}}:
      sql:
        pluginName: postgres12
        databaseName: {{$db}}
        connectAddr: "{{$.PG.Host}}:{{$.PG.Port}}"
        connectProtocol: tcp
        user: "{{$.PG.User}}"
        password: "{{$.PG.Password}}"
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
{{- end}}
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
  tls:
    frontend:
      server:
        certFile: {{.TLSDir}}/frontend.pem
        keyFile: {{.TLSDir}}/frontend-key.pem
        requireClientAuth: true
        clientCaFiles: [{{.TLS.CAFile}}]
      client:
        serverName: {{.TLS.ServerName}}
        rootCaFiles: [{{.TLS.CAFile}}]
    systemWorker:
      certFile: {{.TLSDir}}/frontend.pem
      keyFile: {{.TLSDir}}/frontend-key.pem
      client:
        serverName: {{.TLS.ServerName}}
        rootCaFiles: [{{.TLS.CAFile}}]
services:
{{- range $svc, $p := .Ports}}
  {{$svc}}:
    rpc:
      grpcPort: {{$p.GRPC}}
      membershipPort: {{$p.Membership}}
      bindOnLocalHost: true
{{- end}}
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "{{.ClusterAddress}}"
dcRedirectionPolicy:
  policy: noop
`))

// start runs the node's server process; its output goes to log and to
// ROOT/server.log, whose end an error quotes if the server exits.
func (n *node) start(bin string, log io.Writer) error {
	file, err := os.OpenFile(n.logFile(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("temporal cluster: server log: %w", err)
	}
	cmd := exec.Command(bin, "-r", n.root, "-c", "config", "-e", configEnv, "--allow-no-auth", "start")
	cmd.Dir = n.root
	cmd.Stdout = io.MultiWriter(file, log)
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		file.Close()
		return fmt.Errorf("temporal cluster: start the server in %s: %w", n.root, err)
	}
	n.cmd, n.done = cmd, make(chan error, 1)
	go func() {
		err := cmd.Wait()
		file.Close()
		n.done <- err
	}()
	return nil
}

func (n *node) logFile() string { return filepath.Join(n.root, "server.log") }

// logTail is the end of the node's log, for an error that needs its reason.
func (n *node) logTail() string {
	data, err := os.ReadFile(n.logFile())
	if err != nil {
		return err.Error()
	}
	const max = 2000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

// exited reports whether the node's process has ended, and how.
func (n *node) exited() (bool, error) {
	select {
	case err := <-n.done:
		n.done <- err // keep it for the next reader
		return true, err
	default:
		return false, nil
	}
}

func (n *node) kill() error {
	if n.cmd == nil {
		return errors.New("temporal cluster: the node is not running")
	}
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("temporal cluster: kill the server in %s: %w", n.root, err)
	}
	<-n.done
	n.cmd = nil
	return nil
}

// stop asks the server to shut down and kills it if it has not within 20 s.
func (n *node) stop() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
		n.cmd = nil
	case <-time.After(20 * time.Second):
		_ = n.kill()
	}
}
