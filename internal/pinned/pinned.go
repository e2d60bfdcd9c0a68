// Package pinned builds the Go tools the repository pins in its own modules
// under dev/ (the Temporal CLI, the Temporal server): from the Go module proxy
// on first use, cached by the Go build cache afterwards, never downloaded at
// run time.
package pinned

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Tool returns the path of the tool name (the last element of its package
// path) pinned by the `tool` directive of module, a folder relative to the
// repository root, building it on first use.
func Tool(ctx context.Context, module, name string) (string, error) {
	out, err := goIn(ctx, module, "tool", "-n", name)
	if err != nil {
		return "", fmt.Errorf("build the pinned %s: %w", name, err)
	}
	return out, nil
}

// ModuleDir returns the folder of the source of modulePath at the version
// module pins, from the module cache (for files a module ships, such as
// schemas).
func ModuleDir(ctx context.Context, module, modulePath string) (string, error) {
	out, err := goIn(ctx, module, "list", "-m", "-f", "{{.Dir}}", modulePath)
	if err != nil {
		return "", fmt.Errorf("find the source of %s: %w", modulePath, err)
	}
	if out == "" {
		return "", fmt.Errorf("find the source of %s: not in the module cache after go list in %s", modulePath, module)
	}
	return out, nil
}

// goIn runs the go command in module and returns its trimmed output.
func goIn(ctx context.Context, module string, args ...string) (string, error) {
	dir, err := moduleDir(module)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s in %s: %w: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// moduleDir walks up from the working directory to the checkout holding
// module and returns the module's folder.
func moduleDir(module string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, module, "go.mod")); err == nil {
			return filepath.Join(dir, module), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no %s/go.mod above the working directory; run from the Outpost checkout", module)
		}
		dir = parent
	}
}
