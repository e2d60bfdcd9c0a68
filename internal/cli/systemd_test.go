package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// unitsDir holds the systemd units operators install.
const unitsDir = "../../deploy/systemd"

var execStartRE = regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/outpost (\w+) --config (\S+)$`)

// Each unit runs an outpost command that exists, sandboxed the way the
// Security section of docs/security.md says; systemd-analyze (when installed; CI
// installs it) finds no error and rates its exposure 2.0 or better.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	units, err := filepath.Glob(filepath.Join(unitsDir, "*.service"))
	require.NoError(t, err)
	require.Len(t, units, 2)
	analyze, lookErr := exec.LookPath("systemd-analyze")
	for _, unit := range units {
		data, err := os.ReadFile(unit)
		require.NoError(t, err)
		text := string(data)
		m := execStartRE.FindStringSubmatch(text)
		require.NotNil(t, m, "%s: ExecStart=/usr/local/bin/outpost <command> --config FILE", unit)
		require.NotNil(t, findCommand(m[1]), "%s runs outpost %s, which is no command", unit, m[1])
		for _, line := range []string{"User=outpost", "NoNewPrivileges=yes", "ProtectSystem=strict", "StateDirectory=outpost", "CapabilityBoundingSet="} {
			require.Contains(t, text, "\n"+line+"\n", unit)
		}
		if lookErr != nil {
			continue
		}
		// verify needs ExecStart to exist: put an executable in its place.
		local := filepath.Join(t.TempDir(), filepath.Base(unit))
		stand, err := os.Executable()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(local, []byte(strings.ReplaceAll(text, "/usr/local/bin/outpost", stand)), 0o644))
		out, err := exec.Command(analyze, "verify", local).CombinedOutput()
		require.NoError(t, err, "systemd-analyze verify %s:\n%s", unit, out)
		require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify %s warns", unit)
		out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=20", local).CombinedOutput()
		require.NoError(t, err, "systemd-analyze security %s: exposure above 2.0:\n%s", unit, out)
	}
	if lookErr != nil {
		t.Skip("systemd-analyze not installed (apt-get install systemd; CI installs it): checked the units' text only")
	}
}
