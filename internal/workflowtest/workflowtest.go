// Package workflowtest holds what the tests of several workflow packages
// (workflows, notification) share on Temporal's test environment.
package workflowtest

import (
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/outpost-dev/outpost/contract"
)

// QueryStatus is the answer of the workflow's status query
// (contract.QueryStatus), decoded as T.
func QueryStatus[T any](t require.TestingT, env *testsuite.TestWorkflowEnvironment) T {
	v, err := env.QueryWorkflow(contract.QueryStatus)
	require.NoError(t, err)
	var st T
	require.NoError(t, v.Get(&st))
	return st
}
