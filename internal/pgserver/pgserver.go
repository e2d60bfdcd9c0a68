// Package pgserver runs a throwaway PostgreSQL from Debian's `postgresql`
// package for tests and test harnesses: initdb in a folder the caller gives,
// the server on a loopback port, superuser "outpost" with a generated
// password. It trades durability for speed (fsync off) and is never meant
// for data anyone keeps.
package pgserver

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// superuser is the role initdb creates; the servers are throwaway, so one
// name for all of them keeps DSNs predictable.
const superuser = "outpost"

// readyDeadline caps the wait for a starting server to answer when the
// caller's context has no earlier deadline: generous, because initdb and the
// first checkpoint are slow on a loaded 2-core machine.
const readyDeadline = 2 * time.Minute

// stopDeadline is how long a fast shutdown may take before the server is
// killed outright.
const stopDeadline = time.Minute

// Options says where and how to run the instance.
type Options struct {
	// Dir is the parent folder of the data directory (a test's t.TempDir());
	// required. The server listens on TCP only, so no socket lands there.
	Dir string
	// Port is the loopback port; 0 picks a free one (tests pass
	// testutil.FreePort instead, which no other test process can take).
	Port int
	// Log receives the server's own log; io.Discard when nil.
	Log io.Writer
}

// Server is one running throwaway PostgreSQL on 127.0.0.1, superuser
// "outpost" with a generated password.
type Server struct {
	Host     string
	Port     int
	User     string
	Password string
	DataDir  string

	bin     string
	runAs   *syscall.Credential // nil: run as the caller
	workDir string              // the postgres-owned folder holding DataDir
	log     io.Writer

	mu   sync.Mutex
	proc *process // nil while stopped
}

// process is one run of the postgres binary.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // the exit status, set before done closes
	tail *tail
}

// BinDir returns Debian's /usr/lib/postgresql/<major>/bin holding initdb,
// the highest major version installed.
func BinDir() (string, error) {
	matches, err := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if err != nil || len(matches) == 0 {
		return "", errors.New("no PostgreSQL server found under /usr/lib/postgresql/*/bin: install Debian's package (apt-get install postgresql)")
	}
	sort.Slice(matches, func(i, j int) bool { return majorOf(matches[i]) > majorOf(matches[j]) })
	return filepath.Dir(matches[0]), nil
}

// majorOf reads the major version from /usr/lib/postgresql/<major>/bin/initdb.
func majorOf(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Start creates a database cluster under opts.Dir, starts the server and
// returns once it answers a query. When the caller is root, initdb and the
// server run as the unprivileged `postgres` user (initdb refuses root) on a
// folder that user owns.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("start postgresql: Options.Dir is empty; pass the folder to create the data directory in")
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	runAs, err := unprivilegedUser()
	if err != nil {
		return nil, err
	}
	password, err := newPassword()
	if err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	// Absolute, because the programs run from the folder they own.
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start postgresql: %w", err)
	}
	workDir := filepath.Join(dir, "postgresql")
	s := &Server{
		Host: "127.0.0.1", Port: port, User: superuser, Password: password,
		DataDir: filepath.Join(workDir, "data"),
		bin:     bin, runAs: runAs, workDir: workDir, log: log,
	}
	if err := s.prepareWorkDir(); err != nil {
		return nil, err
	}
	if err := s.initdb(ctx); err != nil {
		return nil, err
	}
	if err := s.writeSettings(); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// DSN is the URL pgx connects to database with.
func (s *Server) DSN(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(s.User, s.Password),
		Host:     net.JoinHostPort(s.Host, strconv.Itoa(s.Port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// CreateDatabase creates an empty database name (UTF-8, C collation, as the
// cluster was initialised).
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	db, err := sql.Open("pgx", s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %q on %s:%d: %w", name, s.Host, s.Port, err)
	}
	return nil
}

// Stop shuts the server down (fast shutdown: sessions are cut, data is
// checkpointed and kept). Stopping a stopped server does nothing.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return nil
	}
	s.proc = nil
	// SIGINT is PostgreSQL's fast shutdown.
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop postgresql on port %d: %w", s.Port, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopDeadline):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("stop postgresql on port %d: no fast shutdown within %s, killed it; its log ends:\n%s", s.Port, stopDeadline, p.tail)
	}
}

// PID is the postmaster's process id, 0 while stopped. Each connection is
// served by a child process of it.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Restart starts the server again after Stop, on the same port and data.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	running := s.proc != nil
	s.mu.Unlock()
	if running {
		return fmt.Errorf("restart postgresql on port %d: it is running; Stop it first", s.Port)
	}
	return s.start(ctx)
}

// prepareWorkDir creates the folder initdb writes into, owned by the user
// the server runs as, and makes sure that user can reach it.
func (s *Server) prepareWorkDir() error {
	if err := os.MkdirAll(s.workDir, 0o700); err != nil {
		return fmt.Errorf("create the postgresql folder: %w", err)
	}
	if s.runAs == nil {
		return nil
	}
	if err := os.Chown(s.workDir, int(s.runAs.Uid), int(s.runAs.Gid)); err != nil {
		return fmt.Errorf("give the postgresql folder %s to the postgres user: %w", s.workDir, err)
	}
	return grantSearch(filepath.Dir(s.workDir))
}

// grantSearch lets other users pass through dir and its parents up to the
// temp folder. Go's t.TempDir() folders are 0700 and root's, so the postgres
// user could not reach the data directory below them; search permission
// lets it through without letting it list or read anything there.
func grantSearch(dir string) error {
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Clean(dir); strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
		info, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("let the postgres user reach %s: %w", dir, err)
		}
		if info.Mode().Perm()&0o001 != 0 {
			continue
		}
		if err := os.Chmod(d, info.Mode().Perm()|0o001); err != nil {
			return fmt.Errorf("let the postgres user reach %s: %w", dir, err)
		}
	}
	return nil
}

// initdb creates the cluster with the superuser's password, UTF-8 and the C
// collation (byte order, as SQLite compares text).
func (s *Server) initdb(ctx context.Context) error {
	pwfile := filepath.Join(s.workDir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write the superuser's password file: %w", err)
	}
	defer os.Remove(pwfile)
	if err := s.chown(pwfile); err != nil {
		return err
	}
	cmd := s.command(ctx, "initdb", "--pgdata", s.DataDir, "--username", superuser, "--pwfile", pwfile,
		"--auth", "scram-sha-256", "--encoding", "UTF8", "--locale", "C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s%s", strings.Join(cmd.Args, " "), err, out, permissionHint(out))
	}
	return nil
}

// permissionHint explains a "Permission denied" from initdb.
func permissionHint(out []byte) string {
	if !strings.Contains(string(out), "Permission denied") {
		return ""
	}
	return "(the postgres user must be able to reach the folder: give its parents search permission, or use a folder under " + os.TempDir() + ")"
}

// chown gives path to the user the server runs as.
func (s *Server) chown(path string) error {
	if s.runAs == nil {
		return nil
	}
	if err := os.Chown(path, int(s.runAs.Uid), int(s.runAs.Gid)); err != nil {
		return fmt.Errorf("give %s to the postgres user: %w", path, err)
	}
	return nil
}

// writeSettings appends this instance's settings to postgresql.conf: TCP on
// loopback only (a Unix socket path under a deep t.TempDir() can pass the
// 107-byte limit), and no waiting on disk flushes, which only protect
// against a machine crash a throwaway server does not outlive.
func (s *Server) writeSettings() error {
	settings := fmt.Sprintf(`
# pgserver: a throwaway test instance
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = ''
max_connections = 200
shared_buffers = 32MB
fsync = off
synchronous_commit = off
full_page_writes = off
timezone = 'UTC'
`, s.Port)
	f, err := os.OpenFile(filepath.Join(s.DataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("write postgresql settings: %w", err)
	}
	if _, err := f.WriteString(settings); err != nil {
		f.Close()
		return fmt.Errorf("write postgresql settings: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write postgresql settings: %w", err)
	}
	return nil
}

// start runs the postgres binary as a child process (not daemonised by
// pg_ctl, so Stop signals it directly and its log streams to s.log) and
// waits until it answers a query.
func (s *Server) start(ctx context.Context) error {
	p := &process{done: make(chan struct{}), tail: &tail{}}
	// Not CommandContext: the server outlives the context that started it.
	p.cmd = s.command(context.Background(), "postgres", "-D", s.DataDir)
	p.cmd.Stdout = io.MultiWriter(s.log, p.tail)
	p.cmd.Stderr = p.cmd.Stdout
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(p.cmd.Args, " "), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	if err := s.waitReady(ctx, p); err != nil {
		_ = s.Stop()
		return err
	}
	return nil
}

// waitReady connects until the server answers, it exits, or the deadline
// passes.
func (s *Server) waitReady(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, readyDeadline)
	defer cancel()
	db, err := sql.Open("pgx", s.DSN("postgres")+"&connect_timeout=5")
	if err != nil {
		return fmt.Errorf("connect to postgresql on port %d: %w", s.Port, err)
	}
	defer db.Close()
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before answering on port %d (%v); its log ends:\n%s", strings.Join(p.cmd.Args, " "), s.Port, p.err, p.tail)
		case <-ctx.Done():
			return fmt.Errorf("postgresql on port %d did not answer: %w (last error: %v); its log ends:\n%s", s.Port, ctx.Err(), err, p.tail)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// command runs one of the server's programs as the user the server runs as,
// from the folder that user owns (a program may chdir back to its start
// folder, which root's folders would refuse).
func (s *Server) command(ctx context.Context, program string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, program), args...)
	cmd.Dir = s.workDir
	cmd.Env = []string{"LC_ALL=C", "LANG=C", "PATH=" + s.bin + ":/usr/bin:/bin"}
	if s.runAs != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.runAs}
	}
	return cmd
}

// unprivilegedUser is the `postgres` user's credential when the caller is
// root (initdb and postgres refuse to run as root), nil otherwise. The
// credential is set on the child process directly rather than through
// runuser, so that Stop's signal reaches the server itself.
func unprivilegedUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("run postgresql as root: initdb refuses root and no postgres user exists (%w): install Debian's package (apt-get install postgresql)", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user's uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user's gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// newPassword is a random superuser password.
func newPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate the superuser's password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// freePort asks the kernel for a free loopback port. Another process can
// take it before the server binds; tests pass testutil.FreePort instead.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a free port for postgresql: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tail keeps the last few kilobytes of the server's log for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

// tailSize is how much of the log an error message quotes.
const tailSize = 4096

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = t.buf[len(t.buf)-tailSize:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
