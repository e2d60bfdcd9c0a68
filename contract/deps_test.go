package contract_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The contract is names and value types every process shares: a program
// that imports it (the SDK, a script) links the standard library and
// nothing else. The Temporal side of the contract (search-attribute keys,
// application-error helpers) is in package temporalcontract.
func TestContractImportsOnlyTheStandardLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, []string{"github.com/outpost-dev/outpost/contract"}, strings.Fields(string(out)),
		"contract imports packages outside the standard library")
}
