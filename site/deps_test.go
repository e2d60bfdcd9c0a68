package site

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A script that imports the SDK links no central code: not the central
// store, the audit events, the mailer or go-mail, nor the workflows,
// central's activities and workers (the site starts workflows by the names
// in package contract), nor the daemon's HTTP server and metrics. (The SQL Server driver stays: a site's database targets may
// be SQL Server.)
func TestSDKLinksNoCentralCode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/outpost-dev/outpost/internal/sitestore", "the list is the SDK's dependencies")
	for _, central := range []string{
		"github.com/outpost-dev/outpost/internal/centralstore",
		"github.com/outpost-dev/outpost/internal/audit",
		"github.com/outpost-dev/outpost/internal/mailer",
		"github.com/wneessen/go-mail",
		"github.com/outpost-dev/outpost/activities",
		"github.com/outpost-dev/outpost/workers",
		"github.com/outpost-dev/outpost/workflows",
		"github.com/outpost-dev/outpost/internal/sitedaemon",
		"github.com/prometheus/client_golang/prometheus",
	} {
		require.NotContains(t, deps, central)
	}
}
