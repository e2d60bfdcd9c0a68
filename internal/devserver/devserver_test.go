package devserver

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/outpost-dev/outpost/internal/pinned"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// Two dev servers run side by side when their frontend ports differ: every
// port each listens on is its frontend's, the ones derived from it (HTTP
// API +1, metrics +2, Web UI +1000) or one of the two the CLI picks for
// its history and matching services. Unpinned, the HTTP API and metrics
// took random ports as well.
func TestTwoDevServersRunSideBySideOnDerivedPorts(t *testing.T) {
	testutil.SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // the first run builds the CLI
	defer cancel()
	first := derivedFreePorts(t, 0)
	second := derivedFreePorts(t, first.Frontend)
	for _, ports := range []Ports{first, second} {
		srv, err := Start(ctx, Options{
			Address: fmt.Sprintf("127.0.0.1:%d", ports.Frontend), Namespace: "default",
			UIPort: ports.UI, HTTPPort: ports.HTTP, MetricsPort: ports.Metrics,
		})
		require.NoError(t, err)
		t.Cleanup(func() { srv.Stop() })
	}
	for _, ports := range []Ports{first, second} {
		listening, err := ListeningPorts(ports.Frontend)
		require.NoError(t, err)
		require.Subset(t, listening, []int{ports.Frontend, ports.HTTP, ports.Metrics, ports.UI})
		require.Len(t, listening, 6, "four pinned ports and two the CLI picks: %v", listening)
		for _, url := range []string{
			fmt.Sprintf("http://127.0.0.1:%d/metrics", ports.Metrics),
			fmt.Sprintf("http://127.0.0.1:%d/api/v1/namespaces", ports.HTTP),
		} {
			resp, err := http.Get(url)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, url)
		}
	}
}

// A port in use is refused before the server starts, naming the port: the
// CLI's own complaint would go to a log nobody reads.
func TestStartRefusesAPortInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	_, err = Start(context.Background(), Options{Address: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), MetricsPort: taken})
	require.ErrorContains(t, err, "metrics port "+strconv.Itoa(taken)+" on 127.0.0.1 is in use")
}

func TestDerivedPorts(t *testing.T) {
	t.Parallel()
	ports, err := DerivedPorts("127.0.0.1:7233")
	require.NoError(t, err)
	require.Equal(t, Ports{Frontend: 7233, HTTP: 7234, Metrics: 7235, UI: 8233}, ports)
	_, err = DerivedPorts("127.0.0.1:65000")
	require.ErrorContains(t, err, "needs a port from 1 to 64535")
}

// derivedFreePorts finds a frontend port whose derived ports are free too
// and do not overlap those of the frontend port other (0: none).
func derivedFreePorts(t *testing.T, other int) Ports {
	t.Helper()
	for {
		ports, err := DerivedPorts(fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)))
		if err != nil || (other != 0 && ports.Frontend >= other-1002 && ports.Frontend <= other+1002) {
			continue
		}
		if checkFree(Options{Address: fmt.Sprintf("127.0.0.1:%d", ports.Frontend), HTTPPort: ports.HTTP, MetricsPort: ports.Metrics, UIPort: ports.UI}) == nil {
			return ports
		}
	}
}

// A dev server on a database file keeps it in SQLite's write-ahead-log mode
// (walPragmas): in the default rollback-journal mode every commit syncs the
// disk two or three times through the server's one connection, and a burst of
// retries left each new hand-off waiting over a second.
func TestDatabaseFileIsInWriteAheadLogMode(t *testing.T) {
	testutil.SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // the first run builds the CLI
	defer cancel()
	dbFile := filepath.Join(t.TempDir(), "temporal.db")
	srv, err := Start(ctx, Options{Address: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), Namespace: "default", DBFile: dbFile})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Stop() })

	// Read-only and without pragmas, not sqlitedb.Open: that sets WAL mode
	// itself, and the check would pass whatever the server did.
	db, err := sql.Open("sqlite", "file:"+dbFile+"?mode=ro")
	require.NoError(t, err)
	defer db.Close()
	var mode string
	require.NoError(t, db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode, "journal mode of %s", dbFile)
}

// fixedInterruptRace is the first modernc.org/sqlite release whose
// interrupt on a cancelled context can no longer land on the statement
// after it (the driver's issue 241).
const fixedInterruptRace = "v1.42.2"

// The dev server keeps its state in SQLite through one connection, and the
// SQLite driver the CLI pins, modernc.org/sqlite v1.34.1, interrupts that
// connection when a request's context ends: late, at times, so the
// interrupt landed on whichever statement ran next. In a CI run of the
// kill test one landed on the history shard's own reads and writes
// ("interrupted (9)" in the server's log): the shard was lost and the
// server answered nothing for the five minutes the test waited, every
// hand-off timing out. dev/temporal raises the driver to a release with
// the race fixed; this fails if a change of the CLI's version drops it.
func TestDevServerSQLiteDriverHasTheInterruptFix(t *testing.T) {
	testutil.SkipIfShort(t)
	dir, err := pinned.ModuleDir(t.Context(), toolModule, "modernc.org/sqlite")
	require.NoError(t, err)
	_, version, found := strings.Cut(filepath.Base(dir), "@")
	require.True(t, found, "no version in the module folder %s", dir)
	require.True(t, atLeast(t, version, fixedInterruptRace),
		"dev/temporal builds the dev server with modernc.org/sqlite %s; it needs %s or later (go get modernc.org/sqlite@%s in dev/temporal)",
		version, fixedInterruptRace, fixedInterruptRace)
}

// atLeast reports whether release version a (vX.Y.Z) is b or later.
func atLeast(t *testing.T, a, b string) bool {
	t.Helper()
	parse := func(v string) []int {
		n := make([]int, 3)
		_, err := fmt.Sscanf(v, "v%d.%d.%d", &n[0], &n[1], &n[2])
		require.NoError(t, err, "version %q", v)
		return n
	}
	return slices.Compare(parse(a), parse(b)) >= 0
}
