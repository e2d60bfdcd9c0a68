package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/internal/cluster"
	"github.com/outpost-dev/outpost/internal/devserver"
	"github.com/outpost-dev/outpost/internal/pgserver"
	"github.com/outpost-dev/outpost/internal/pinned"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// guidePath is the deployment guide, from this package.
const guidePath = "../../docs/deploying.md"

// guideDeadline bounds the guide's whole run on a loaded machine.
const guideDeadline = 8 * time.Minute

// TestDeployingGuide runs every sh block of docs/deploying.md, in order, in
// one bash session against a Temporal cluster of two server processes on
// PostgreSQL with mutual TLS, a second PostgreSQL for the guide's database
// host and an SMTP server, with the substitutions its "How this guide is
// tested" section lists: the guide's notification is delivered once.
func TestDeployingGuide(t *testing.T) {
	testutil.SkipIfShort(t)
	log := zaptest.NewLogger(t)
	c := cluster.StartForTest(t, "guide-harness", log)
	db := pgserver.StartForTest(t)
	sink, err := smtpsink.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { sink.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), guideDeadline)
	defer cancel()
	root := t.TempDir()
	g := &guideRun{t: t, root: root, cluster: c}
	g.installTools(ctx)
	blocks := guideBlocks(t)
	subst := g.substitutions(db, sink.Port())
	script := []string{guidePreamble}
	for i, b := range blocks {
		g.prepareHost(b.host)
		text := b.text
		for _, s := range subst {
			text = strings.ReplaceAll(text, s[0], s[1])
		}
		text = strings.ReplaceAll(text, "/etc/outpost", g.hostDir(b.host, "etc/outpost"))
		text = strings.ReplaceAll(text, "/var/lib/outpost", g.hostDir(b.host, "var/lib/outpost"))
		script = append(script, fmt.Sprintf("echo '== block %d, on %s'\non %s\n%s", i+1, b.host, b.host, text))
	}
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.Join(script, "\n"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(root, "bin")+":"+os.Getenv("PATH"),
		"GUIDE_ROOT="+root, "PGPASSWORD="+db.Password)
	t.Cleanup(g.stopServices)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the guide's commands:\n%s\nservices' logs:\n%s", out, g.serviceLogs())

	mail := sink.CountByNotification()
	require.Len(t, mail, 1, "the guide's one notification reached the SMTP server")
	for id, n := range mail {
		require.Equal(t, 1, n, "emails for %s", id)
	}
}

// guideBlock is one sh block of the guide and the host its first line names.
type guideBlock struct{ host, text string }

var (
	shBlockRE = regexp.MustCompile("(?s)```sh\n(.*?)```")
	onHostRE  = regexp.MustCompile(`^# on (\S+)\n`)
)

func guideBlocks(t *testing.T) []guideBlock {
	data, err := os.ReadFile(guidePath)
	require.NoError(t, err)
	var blocks []guideBlock
	for _, m := range shBlockRE.FindAllStringSubmatch(string(data), -1) {
		host := onHostRE.FindStringSubmatch(m[1])
		require.NotNil(t, host, "every sh block of %s starts with `# on HOST`:\n%s", guidePath, m[1])
		blocks = append(blocks, guideBlock{host: host[1], text: m[1]})
	}
	require.GreaterOrEqual(t, len(blocks), 10, "the guide's sh blocks")
	return blocks
}

// guideRun is the guide's run: the hosts' folders, tools and services.
type guideRun struct {
	t       *testing.T
	root    string
	cluster *cluster.Cluster
}

func (g *guideRun) hostDir(host, path string) string {
	return filepath.Join(g.root, "hosts", host, path)
}

// prepareHost makes host's folders and gives it the cluster's CA and
// client certificate as /etc/outpost/tls (what a host gets from the PKI).
func (g *guideRun) prepareHost(host string) {
	tls := g.hostDir(host, "etc/outpost/tls")
	require.NoError(g.t, os.MkdirAll(tls, 0o750))
	require.NoError(g.t, os.MkdirAll(g.hostDir(host, "var/lib/outpost"), 0o700))
	files := g.cluster.TLS()
	for name, from := range map[string]string{"ca.pem": files.CAFile, "client.pem": files.CertFile, "client-key.pem": files.KeyFile} {
		data, err := os.ReadFile(from)
		require.NoError(g.t, err)
		require.NoError(g.t, os.WriteFile(filepath.Join(tls, name), data, 0o600))
	}
}

// installTools puts the pinned temporal CLI and SQL tool, outpost built
// from the checkout and the systemctl stand-in in ROOT/bin.
func (g *guideRun) installTools(ctx context.Context) {
	bin := filepath.Join(g.root, "bin")
	require.NoError(g.t, os.MkdirAll(bin, 0o755))
	cli, err := devserver.TemporalBinary(ctx)
	require.NoError(g.t, err)
	sqlTool, err := pinned.Tool(ctx, "dev/temporal-server", "sql")
	require.NoError(g.t, err)
	require.NoError(g.t, os.Symlink(cli, filepath.Join(bin, "temporal")))
	require.NoError(g.t, os.Symlink(sqlTool, filepath.Join(bin, "temporal-sql-tool")))
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(bin, "outpost"), "./cmd/outpost")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(g.t, err, "build outpost: %s", out)
	require.NoError(g.t, os.WriteFile(filepath.Join(bin, "systemctl"), []byte(g.systemctlStandIn()), 0o755))
}

// systemctlStandIn is a script that takes `systemctl enable --now UNIT`
// for each unit in deploy/systemd and runs the unit's ExecStart with its
// EnvironmentFile in its WorkingDirectory, the paths in the host's folder
// (GUIDE_HOST, set by `on`), in the background; its pid goes to
// ROOT/services/.
func (g *guideRun) systemctlStandIn() string {
	units, err := filepath.Glob("../../deploy/systemd/*.service")
	require.NoError(g.t, err)
	var cases []string
	for _, unit := range units {
		data, err := os.ReadFile(unit)
		require.NoError(g.t, err)
		field := func(key string) string {
			m := regexp.MustCompile(`(?m)^` + key + `=-?(.*)$`).FindStringSubmatch(string(data))
			require.NotNil(g.t, m, "%s: no %s", unit, key)
			return m[1]
		}
		exec := strings.Replace(field("ExecStart"), "/usr/local/bin/outpost", "outpost", 1)
		cases = append(cases, fmt.Sprintf("%s) exec_start=%q env_file=%q work_dir=%q ;;",
			strings.TrimSuffix(filepath.Base(unit), ".service"), exec, field("EnvironmentFile"), field("WorkingDirectory")))
	}
	sort.Strings(cases)
	return `#!/bin/bash
# Stand-in for systemctl in TestDeployingGuide: enable --now UNIT only.
set -euo pipefail
[ "$1 $2" = "enable --now" ] || { echo "systemctl stand-in: only 'enable --now UNIT'" >&2; exit 2; }
case "$3" in
` + strings.Join(cases, "\n") + `
*) echo "systemctl stand-in: no unit $3 in deploy/systemd" >&2; exit 2 ;;
esac
host="$GUIDE_ROOT/hosts/$GUIDE_HOST"
in_host() { echo "${1//\/etc\/outpost/$host/etc/outpost}" | sed "s|/var/lib/outpost|$host/var/lib/outpost|g"; }
mkdir -p "$GUIDE_ROOT/services"
log="$GUIDE_ROOT/services/$GUIDE_HOST-$3.log"
cd "$(in_host "$work_dir")"
(set -a; [ -f "$(in_host "$env_file")" ] && . "$(in_host "$env_file")"; set +a; exec $(in_host "$exec_start")) >"$log" 2>&1 &
echo $! > "$GUIDE_ROOT/services/$GUIDE_HOST-$3.pid"
`
}

// guidePreamble defines on HOST, run before each block: it gives host a
// copy of every file other hosts made under /etc/outpost, as FILE.HOST.
const guidePreamble = `on() {
  export GUIDE_HOST=$1
  local other name f
  for other in "$GUIDE_ROOT"/hosts/*; do
    name=$(basename "$other")
    [ "$name" = "$1" ] && continue
    (cd "$other/etc/outpost" && find . -type f ! -name '*.*-*') | while read -r f; do
      mkdir -p "$(dirname "$GUIDE_ROOT/hosts/$1/etc/outpost/$f")"
      cp "$other/etc/outpost/$f" "$GUIDE_ROOT/hosts/$1/etc/outpost/$f.$name"
    done
  done
}`

// substitutions maps the guide's hosts, ports and packages to the
// harness's, longest first where one holds another.
func (g *guideRun) substitutions(db *pgserver.Server, smtpPort int) [][2]string {
	frontends := g.cluster.Frontends()
	schema, err := pinned.ModuleDir(context.Background(), "dev/temporal-server", "go.temporal.io/server")
	require.NoError(g.t, err)
	dbPort := strconv.Itoa(db.Port)
	subst := [][2]string{
		{"temporal-2.example.internal:7233", frontends[1]},
		{"temporal.example.internal:7233", frontends[0]},
		{"temporal.example.internal", g.cluster.TLS().ServerName},
		{"sudo -u postgres psql", fmt.Sprintf("psql postgres://%s@127.0.0.1:%s/postgres", db.User, dbPort)},
		{"--ep db.example.internal -p 5432", "--ep 127.0.0.1 -p " + dbPort},
		{"db.example.internal:5432", "127.0.0.1:" + dbPort},
		{"sslmode=verify-full", "sslmode=disable"},
		{"host: smtp.example.internal", "host: 127.0.0.1"},
		{"port: 587", "port: " + strconv.Itoa(smtpPort)},
		{"tls: starttls", "tls: none"},
		{"/usr/local/share/temporal/schema", filepath.Join(schema, "schema")},
	}
	for _, addr := range []string{"10.0.1.21:8481", "10.0.1.22:8481", "10.0.0.11:8480", "10.0.0.12:8480"} {
		subst = append(subst, [2]string{addr, freeAddr(g.t)})
	}
	return append(subst, [2]string{"10.0.0.11", "127.0.0.1"}, [2]string{"10.0.0.12", "127.0.0.1"})
}

// stopServices ends the processes the systemctl stand-in started.
func (g *guideRun) stopServices() {
	pids, _ := filepath.Glob(filepath.Join(g.root, "services", "*.pid"))
	for _, file := range pids {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			continue
		}
		// Not this process's child (the stand-in's): ask, then look
		// until it is gone.
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(20 * time.Second)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// serviceLogs is the end of every service's log, for a failure.
func (g *guideRun) serviceLogs() string {
	logs, _ := filepath.Glob(filepath.Join(g.root, "services", "*.log"))
	var b strings.Builder
	for _, file := range logs {
		data, _ := os.ReadFile(file)
		if len(data) > 4000 {
			data = data[len(data)-4000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(file), data)
	}
	return b.String()
}
