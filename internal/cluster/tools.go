package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/internal/pinned"
)

// toolModule is the module, relative to the repository root, that pins the
// server and its tools.
const toolModule = "dev/temporal-server"

// tools are the pinned binaries and the schemas of the pinned server.
type tools struct {
	server, sql, tdbg string
	// schemaDir is the server module's schema/postgresql/v12.
	schemaDir string
}

// buildTools builds the pinned binaries on first use (cached afterwards)
// and finds the schemas in the module cache.
func buildTools(ctx context.Context) (tools, error) {
	var t tools
	var err error
	for name, bin := range map[string]*string{"server": &t.server, "sql": &t.sql, "tdbg": &t.tdbg} {
		if *bin, err = pinned.Tool(ctx, toolModule, name); err != nil {
			return t, fmt.Errorf("temporal cluster: %w", err)
		}
	}
	dir, err := pinned.ModuleDir(ctx, toolModule, "go.temporal.io/server")
	if err != nil {
		return t, fmt.Errorf("temporal cluster: %w", err)
	}
	t.schemaDir = filepath.Join(dir, "schema", "postgresql", "v12")
	return t, nil
}

// applySchemas creates Temporal's two databases and brings each to the
// schema version the pinned server expects, with the server's SQL tool.
func (c *Cluster) applySchemas(ctx context.Context) error {
	for db, schema := range map[string]string{"temporal": "temporal", "temporal_visibility": "visibility"} {
		steps := [][]string{
			{"create-database"},
			{"setup-schema", "-v", "0.0"},
			{"update-schema", "-d", filepath.Join(c.tools.schemaDir, schema, "versioned")},
		}
		for _, step := range steps {
			if err := c.sqlTool(ctx, db, step...); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Cluster) sqlTool(ctx context.Context, db string, args ...string) error {
	conn := []string{"--plugin", "postgres12", "--ep", c.pg.Host, "-p", strconv.Itoa(c.pg.Port),
		"-u", c.pg.User, "--pw", c.pg.Password, "--db", db}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, c.tools.sql, append(conn, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("temporal cluster: temporal-sql-tool %s on database %s: %w: %s", args[0], db, err, strings.TrimSpace(out.String()))
	}
	return nil
}
