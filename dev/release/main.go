// Command release builds outpost for the Linux machines it runs on (edge
// gateways are often ARM) into one folder, with SHA256SUMS:
//
//	go run ./dev/release            # into dist/
//	go run ./dev/release -out DIR
//
// Each binary is static (CGO_ENABLED=0: the SQLite driver is pure Go),
// built with -trimpath, and names its version, commit and commit date in
// `outpost --version`.
package main

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// targets are the machines a release is built for, as GOOS/GOARCH.
var targets = []string{"linux/amd64", "linux/arm64"}

func main() {
	out := flag.String("out", "dist", "`DIR` for the binaries and SHA256SUMS")
	flag.Parse()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		err = release(filepath.Dir(strings.TrimSpace(string(gomod))), *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// release builds every target from the module at root into out and writes
// their SHA256SUMS there.
func release(root, out string) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	ldflags, err := stampFlags(root)
	if err != nil {
		return err
	}
	var sums strings.Builder
	for _, target := range targets {
		goos, goarch, _ := strings.Cut(target, "/")
		name := "outpost-" + goos + "-" + goarch
		if err := build(root, filepath.Join(out, name), goos, goarch, ldflags); err != nil {
			return err
		}
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			return err
		}
		fmt.Fprintf(&sums, "%x  %s\n", sha256.Sum256(data), name)
		fmt.Println(filepath.Join(out, name))
	}
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(sums.String()), 0o644)
}

// build cross-compiles cmd/outpost for goos/goarch into bin. -buildvcs=true
// overrides a GOFLAGS that turns VCS stamps off: a release names its commit.
func build(root, bin, goos, goarch, ldflags string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=true", "-ldflags", ldflags, "-o", bin, "./cmd/outpost")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s/%s: %w\n%s", goos, goarch, err, out)
	}
	return nil
}

// stampFlags stamps the tag (git describe), commit and commit date for
// `outpost --version`, which prefers Go's own VCS stamps: Go has none for
// a build in a linked git worktree.
func stampFlags(root string) (string, error) {
	version, err := git(root, "describe", "--tags", "--always", "--dirty")
	if err != nil {
		return "", fmt.Errorf("read the version to stamp (run it in a git checkout): %w", err)
	}
	commit, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	unix, err := git(root, "show", "-s", "--format=%ct", "HEAD")
	if err != nil {
		return "", err
	}
	seconds, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return "", fmt.Errorf("commit time %q: %w", unix, err)
	}
	const pkg = "github.com/outpost-dev/outpost/internal/cli."
	return fmt.Sprintf("-X %sstampedVersion=%s -X %sstampedCommit=%s -X %sstampedDate=%s",
		pkg, version, pkg, commit, pkg, time.Unix(seconds, 0).UTC().Format(time.RFC3339)), nil
}

// git runs git in dir and returns its output, trimmed.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(exit.Stderr)))
	}
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}
