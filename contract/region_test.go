package contract_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
)

// No region is today's routing, names and ids; a region of its own
// namespace keeps the queue and names its schedules and ingest workflows;
// a region in a shared namespace gets its own queue.
func TestRegionRoutes(t *testing.T) {
	t.Parallel()
	none := contract.Region{}
	require.Equal(t, contract.CentralTaskQueue, none.TaskQueue())
	require.Equal(t, contract.PurgeScheduleID, none.PurgeScheduleID())
	require.Equal(t, contract.TelemetryIngestWorkflowID("plant-1"), none.TelemetryIngestWorkflowID("plant-1"))

	own := contract.Region{Name: "eu"}
	require.Equal(t, contract.CentralTaskQueue, own.TaskQueue())
	require.Equal(t, "outpost-purge-eu", own.PurgeScheduleID())

	shared := contract.Region{Name: "eu", OwnQueue: true}
	require.Equal(t, "outpost-central-eu", shared.TaskQueue())
	us := contract.Region{Name: "us", OwnQueue: true}
	require.NotEqual(t, shared.TelemetryIngestWorkflowID("plant-1"), us.TelemetryIngestWorkflowID("plant-1"),
		"two regions in one namespace must never share an ingest workflow")
	require.True(t, strings.HasPrefix(shared.TelemetryIngestWorkflowID("plant-1"), "telemetry/ingest-eu-"))
}

func TestCheckRegionName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"eu", "us-east-1", "apac2", strings.Repeat("a", 63)} {
		require.NoError(t, contract.CheckRegionName(ok), ok)
	}
	for _, bad := range []string{"", "EU", "eu west", "eu_west", "-eu", "eu-", "eu/1", strings.Repeat("a", 64), "été"} {
		err := contract.CheckRegionName(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "lower-case letters, digits and '-'", bad)
	}
}
