package site

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxSDKPackages bounds the packages a script that calls Notify links
// (`go list -deps` of testdata/notify, standard library included): every
// one runs its init() in the script. It was 475 while the contract and the
// SDK imported the Temporal SDK, and 250 while the SDK linked Call's HTTP
// client, the SQL Server driver for Write and YAML for OpenConfig (249, 196
// of them the standard library); now those are package site/targetcalls',
// and the script links about 150, some 130 of them the standard library
// (database/sql and SQLite for the store).
const maxSDKPackages = 200

// notifyScript is a program that opens the SDK and calls Notify and
// Status, as a script that only notifies does.
const notifyScript = "./testdata/notify"

// A script that calls only Notify links no more than maxSDKPackages
// packages, and none of what Call and Write need (package targetcalls):
// not net/http, crypto/tls, the SQL Server driver or YAML.
func TestSDKLinksFewPackages(t *testing.T) {
	t.Parallel()
	// go list does not type-check: vet keeps the script what a user can build.
	out, err := exec.Command("go", "vet", notifyScript).CombinedOutput()
	require.NoError(t, err, "the notify script no longer builds against the SDK: %s", out)
	out, err = exec.Command("go", "list", "-deps", notifyScript).CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/outpost-dev/outpost/site", "the list is the notify script's dependencies")
	require.LessOrEqual(t, len(deps), maxSDKPackages, "a script that calls Notify links %d packages, over its bound of %d: a dependency came in that every script would link", len(deps), maxSDKPackages)
	for _, callsOnly := range []string{
		"net/http",
		"crypto/tls",
		"github.com/microsoft/go-mssqldb",
		"gopkg.in/yaml.v3",
		"github.com/outpost-dev/outpost/internal/targetexec",
		"github.com/outpost-dev/outpost/internal/config",
		"github.com/outpost-dev/outpost/site/targetcalls",
	} {
		require.NotContains(t, deps, callsOnly, "a script that only notifies links what Call and Write need")
	}
}

// A script that imports the SDK links no central code: not the central
// store, the audit events, the mailer or go-mail, nor the workflows,
// central's activities and workers (the site starts workflows by the names
// in package contract), nor the daemon's HTTP server and metrics, nor the
// Temporal client (package site/temporalcentral asks central for Status).
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
