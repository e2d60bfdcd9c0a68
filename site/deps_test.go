package site

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxSDKPackages bounds the packages a script that calls Notify links
// (`go list -deps` of the SDK, standard library included). It was 475
// while the contract and the SDK imported the Temporal SDK; it is 245
// without: 195 of them the standard library (database/sql and SQLite for
// the store, net/http and crypto/tls for Call's external systems), the
// rest SQLite, the SQL Server driver for Write, YAML for OpenConfig. A
// bound of 200 would need Call's HTTP client and the SQL Server driver out
// of what every script links.
const maxSDKPackages = 250

// A script that calls only Notify links what the SDK links, and no more
// than maxSDKPackages packages: every one runs its init() in the script.
func TestSDKLinksFewPackages(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/outpost-dev/outpost/site", "the list is the SDK's dependencies")
	require.LessOrEqual(t, len(deps), maxSDKPackages, "the SDK links %d packages, over its bound of %d: a dependency came in that every script would link", len(deps), maxSDKPackages)
}

// A script that imports the SDK links no central code: not the central
// store, the audit events, the mailer or go-mail, nor the workflows,
// central's activities and workers (the site starts workflows by the names
// in package contract), nor the daemon's HTTP server and metrics, nor the
// Temporal client (package site/temporalcentral asks central for Status). (The SQL Server driver stays: a site's database targets may
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
		"github.com/outpost-dev/outpost/notification",
		"github.com/wneessen/go-mail",
		"github.com/outpost-dev/outpost/activities",
		"github.com/outpost-dev/outpost/workers",
		"github.com/outpost-dev/outpost/workflows",
		"github.com/outpost-dev/outpost/internal/sitedaemon",
		"github.com/prometheus/client_golang/prometheus",
		"go.temporal.io/sdk/client",
		"go.temporal.io/sdk/temporal",
		"github.com/outpost-dev/outpost/activities/onsite",
	} {
		require.NotContains(t, deps, central)
	}
}
