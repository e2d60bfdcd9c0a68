package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

// childProcess is this binary re-executed as a site daemon (`outpost site`)
// or a central worker (`outpost central`), each in its own process, so the
// RSS and CPU read from /proc are its alone, not the benchmark's.
type childProcess struct {
	// what names it in errors: "site daemon", "central worker".
	what string
	cmd  *exec.Cmd
	url  string
	// done is closed when the process has exited.
	done chan struct{}
	log  string
}

// httpClient serves every request to a site daemon: one kept-alive
// connection, as a script polling its operations would use.
var httpClient = &http.Client{Timeout: 10 * time.Second}

// startSiteProcess re-executes this binary as `outpost site --config
// <name>-site.yaml` for site siteID on store against the Temporal frontend
// at temporalAddr, its output in <name>-site.log, and returns once /healthz
// answers. The config is the site's defaults (JSON logs at info, as in
// production) but for the id, the store, a free API port, the address and
// the run's parallelism.
func (r *run) startSiteProcess(ctx context.Context, name, siteID, store, temporalAddr string) (*childProcess, error) {
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cfg, err := r.writeSiteConfig(name, siteID, store, listen, temporalAddr)
	if err != nil {
		return nil, err
	}
	return startChild(ctx, "site daemon", listen, r.path(name+"-site.log"), nil, "site", "--config", cfg)
}

// startChild re-executes this binary (the outpost CLI, or a test binary
// standing in for it) with args and this process's environment plus env
// (NAME=value), its output in log, and returns once /healthz answers on
// listen.
func startChild(ctx context.Context, what, listen, log string, env []string, args ...string) (*childProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to run `outpost %s`: %w", args[0], err)
	}
	p := &childProcess{what: what, url: "http://" + listen, done: make(chan struct{}), log: log}
	if err := p.start(exe, env, args...); err != nil {
		return nil, err
	}
	if err := p.waitHealthy(ctx); err != nil {
		return nil, errors.Join(err, p.stop())
	}
	return p, nil
}

func (r *run) writeSiteConfig(name, siteID, store, listen, temporalAddr string) (string, error) {
	data, err := yaml.Marshal(map[string]any{
		"temporal": map[string]any{"address": temporalAddr, "namespace": namespace},
		"site": map[string]any{
			"id": siteID, "node": benchNode, "store": store, "listen": listen,
			"forward_parallelism": r.opts.Parallelism,
		},
		"log": map[string]any{"format": "json"},
	})
	if err != nil {
		return "", fmt.Errorf("site config: %w", err)
	}
	path := r.path(name + "-site.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("site config: %w", err)
	}
	return path, nil
}

func (p *childProcess) start(exe string, env []string, args ...string) error {
	out, err := os.Create(p.log)
	if err != nil {
		return fmt.Errorf("%s log: %w", p.what, err)
	}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s %s: %w", exe, strings.Join(args, " "), err)
	}
	go func() {
		_ = p.cmd.Wait() // its log says why; stop and waitFor see done
		out.Close()
		close(p.done)
	}()
	return nil
}

func (p *childProcess) waitHealthy(ctx context.Context) error {
	return waitFor(ctx, time.Minute, p.done, func(ctx context.Context) (bool, error) {
		_, err := p.get(ctx, "/healthz")
		return err == nil, nil
	}, func() string { return "waiting for the " + p.what + "'s /healthz (log: " + p.log + ")" })
}

// get requests path and returns the whole answer; anything but 200 is an error.
func (p *childProcess) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// stopGrace is how long a child process may take to stop on SIGTERM.
const stopGrace = 10 * time.Second

// stop sends SIGTERM and waits; a process still running after stopGrace is
// killed and reported.
func (p *childProcess) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("the %s did not stop within %s of SIGTERM; killed (log: %s)", p.what, stopGrace, p.log)
	}
}

// cpu is the CPU time the stopped process used (user and system).
func (p *childProcess) cpu() time.Duration {
	<-p.done
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// memory is a process's resident set size now and at its peak, in MiB.
type memory struct {
	rss, peak float64
}

// memory reads VmRSS and VmHWM from /proc/<pid>/status (Linux only).
func (p *childProcess) memory() (memory, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	if err != nil {
		return memory{}, fmt.Errorf("read the %s's RSS (needs Linux's /proc): %w", p.what, err)
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), ":")
		switch name {
		case "VmRSS":
			m.rss, err = kibToMiB(value)
		case "VmHWM":
			m.peak, err = kibToMiB(value)
		}
		if err != nil {
			return memory{}, fmt.Errorf("/proc/%d/status: %s: %w", p.cmd.Process.Pid, name, err)
		}
	}
	if m.peak == 0 {
		return memory{}, fmt.Errorf("/proc/%d/status has no VmHWM", p.cmd.Process.Pid)
	}
	return m, sc.Err()
}

// kibToMiB reads "  12345 kB".
func kibToMiB(v string) (float64, error) {
	kib, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
	return kib / 1024, err
}

// idleFor is how long the idle daemon runs before its RSS is read: long
// enough to start its forwarder, worker and telemetry.
const idleFor = 3 * time.Second

// idleSite is the RSS of a daemon on an empty store against temporalAddr,
// idleFor after it answered /healthz: the baseline of the daemon's RSS. Its
// site id is its own: a daemon started after it on the same server with
// the bench's site id would otherwise wait for its poller to stand still
// (one active daemon per site id).
func (r *run) idleSite(ctx context.Context, name, temporalAddr string) (mem memory, err error) {
	r.step("%s: idle site daemon on an empty store, %s", name, idleFor)
	store := r.path(name + "-site.db")
	if err := createStore(ctx, store); err != nil {
		return memory{}, err
	}
	p, err := r.startSiteProcess(ctx, name, benchSite+"-idle", store, temporalAddr)
	if err != nil {
		return memory{}, err
	}
	defer func() { err = joinStop(err, p.stop()) }()
	if err := sleepUntil(ctx, time.Now().Add(idleFor)); err != nil {
		return memory{}, err
	}
	return p.memory()
}
