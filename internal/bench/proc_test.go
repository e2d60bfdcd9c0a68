package bench

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testutil"
)

// processCPU reads another process's CPU time to the nanosecond: a shell
// waiting for its input has used well under a millisecond, which
// /proc/<pid>/stat's 10 ms ticks read as 0, as they read the fleet's
// second central worker in a short run of the bench. (A process still on
// its first time slice has nothing accounted yet, so the test waits for
// the shell to block.)
func TestProcessCPUOfAnotherProcessIsExact(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read line || :")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		stdin.Close()
		require.NoError(t, cmd.Wait())
	}()
	var cpu time.Duration
	testutil.WaitFor(t, 5*time.Second, func() bool {
		cpu, err = processCPU(cmd.Process.Pid)
		require.NoError(t, err)
		return cpu > 0
	}, func() string { return "the shell's CPU time read above 0" })
	ticks, err := readStat(cmd.Process.Pid)
	require.NoError(t, err)
	require.Less(t, ticks.cpu, clockTick, "the shell used %s, under a tick, so /proc/<pid>/stat could not tell", cpu)
}

// A measured store goes with its WAL and shared-memory files before the
// next section runs, unless the run keeps its files.
func TestRemoveStoreRemovesTheStoreAndItsSideFiles(t *testing.T) {
	for _, keep := range []bool{false, true} {
		r := &run{dir: t.TempDir(), opts: Options{Keep: keep}}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			require.NoError(t, os.WriteFile(r.path("big.db"+suffix), []byte("x"), 0o600))
		}
		r.removeStore("big.db")
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_, err := os.Stat(r.path("big.db" + suffix))
			if keep {
				require.NoError(t, err, "kept: big.db%s", suffix)
			} else {
				require.ErrorIs(t, err, os.ErrNotExist, "removed: big.db%s", suffix)
			}
		}
	}
}
