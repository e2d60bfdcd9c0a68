package operator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/operator"
)

func TestCandidateWorkflowIDs(t *testing.T) {
	t.Parallel()
	ids, err := operator.CandidateWorkflowIDs("9b1c")
	require.NoError(t, err)
	require.Equal(t, []string{"notification/9b1c", "call/9b1c"}, ids)
	ids, err = operator.CandidateWorkflowIDs("call/9b1c")
	require.NoError(t, err)
	require.Equal(t, []string{"call/9b1c"}, ids)
	ids, err = operator.CandidateWorkflowIDs("notification/9b1c")
	require.NoError(t, err)
	require.Equal(t, []string{"notification/9b1c"}, ids)
	_, err = operator.CandidateWorkflowIDs("telemetry/plant-1/3")
	require.ErrorContains(t, err, "is not an operation id")
	_, err = operator.CandidateWorkflowIDs(" ")
	require.Error(t, err)
	require.Equal(t, "9b1c", operator.OperationID("call/9b1c"))
	require.Equal(t, "9b1c", operator.OperationID("notification/9b1c"))
}
