package docs

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/outpost-dev/outpost/"

// imports maps every package of the module (tests aside) to its direct
// imports.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	all := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		all[strings.TrimPrefix(fields[0], module)] = fields[1:]
	}
	return all
}

// The import rules docs/ARCHITECTURE.md states, checked.
func TestArchitectureImportRules(t *testing.T) {
	t.Parallel()
	all := imports(t)
	if len(all) < 40 {
		t.Fatalf("go list found %d packages: the rules below would check nothing", len(all))
	}
	// Only the edge imports the config file's package.
	edge := []string{"internal/cli", "internal/fromconfig", "internal/siteconfig", "internal/bench", "internal/cluster"}
	for pkg, deps := range all {
		if slices.Contains(deps, module+"internal/config") && !slices.Contains(edge, pkg) {
			t.Errorf("%s imports internal/config: only the edge (%s) may; take options instead", pkg, strings.Join(edge, ", "))
		}
	}
	// config imports nothing of Outpost but httpserve, targets and the contract.
	for _, dep := range all["internal/config"] {
		if strings.HasPrefix(dep, module) && !slices.Contains([]string{"internal/httpserve", "internal/targets", "contract"}, strings.TrimPrefix(dep, module)) {
			t.Errorf("internal/config imports %s", dep)
		}
	}
	// Workflows are deterministic: no I/O package.
	for _, pkg := range []string{"workflows", "workflows/operation"} {
		for _, dep := range all[pkg] {
			if slices.Contains([]string{"net", "net/http", "database/sql", "os", "os/exec", "math/rand", "math/rand/v2"}, dep) {
				t.Errorf("%s imports %s: workflows do no I/O", pkg, dep)
			}
		}
	}
	// The notification's workflow lives with its activities: workflows
	// does not reach into notification, and both take what they share from
	// workflows/operation, which builds on the contract and the Temporal SDK
	// only.
	if slices.Contains(all["workflows"], module+"notification") {
		t.Error("workflows imports notification: the notification's workflow and activities are in notification")
	}
	for _, pkg := range []string{"workflows", "notification"} {
		if !slices.Contains(all[pkg], module+"workflows/operation") {
			t.Errorf("%s does not import workflows/operation: the workflows' shared building blocks have one home", pkg)
		}
	}
	operationMay := []string{"contract", "temporalcontract", "internal/callstate"}
	for _, dep := range all["workflows/operation"] {
		if strings.HasPrefix(dep, module) && !slices.Contains(operationMay, strings.TrimPrefix(dep, module)) ||
			strings.Contains(dep, ".") && !strings.HasPrefix(dep, module) && !strings.HasPrefix(dep, "go.temporal.io/") {
			t.Errorf("workflows/operation imports %s: it imports only %s, the Temporal SDK and the standard library",
				dep, strings.Join(operationMay, ", "))
		}
	}
	// The SDK links no central code and no Temporal client, nor what makes
	// calls and writes or reads the file (site/targetcalls has them).
	for _, dep := range all["site"] {
		if strings.HasPrefix(dep, "go.temporal.io/") || slices.Contains([]string{module + "workflows", module + "activities",
			module + "activities/onsite", module + "workers", module + "internal/sitedaemon", module + "internal/centralstore",
			module + "internal/targetexec", module + "internal/siteconfig", "net/http"}, dep) {
			t.Errorf("site imports %s", dep)
		}
	}
	// The SDK and the daemon take call-param redaction from internal/redact:
	// the daemon calls nothing of the SDK's for it.
	for _, pkg := range []string{"site", "internal/sitedaemon"} {
		if !slices.Contains(all[pkg], module+"internal/redact") {
			t.Errorf("%s does not import internal/redact: redaction has one home both use", pkg)
		}
	}
	// contract, callstate and httpanswer are leaves.
	for _, leaf := range []string{"contract", "internal/httpanswer"} {
		for _, dep := range all[leaf] {
			if strings.Contains(dep, ".") {
				t.Errorf("%s imports %s: it imports only the standard library", leaf, dep)
			}
		}
	}
	for _, dep := range all["internal/callstate"] {
		if strings.Contains(dep, ".") && dep != module+"contract" {
			t.Errorf("internal/callstate imports %s: it imports only the standard library and contract", dep)
		}
	}
}
