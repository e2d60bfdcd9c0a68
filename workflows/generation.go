package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
)

// WorkerBuildID is the build id central workers run under
// (worker.Options.BuildID). Temporal records the build id of the worker that
// completed each workflow task in its WorkflowTaskCompleted event, so a
// workflow can tell, the same way on every replay, which generation of this
// code made a decision: workflow.GetInfo(ctx).GetCurrentBuildID() is the
// running worker's id in a new task and the recorded one in a replayed task.
//
// Generation 2 drops the version check at a notification's start
// (changeRecordInFirstAttempt): its GetVersion call recorded a marker and
// upserted TemporalChangeVersion, one more visibility write for every
// notification, for a path every worker since has taken. Generation 3 runs
// contract.WorkflowNotificationStarted, and sites look for it in the build
// ids of the workers polling contract.CentralTaskQueue before they start
// notifications that way. Raise the number when a change must tell workers
// of this code from workers before it.
const WorkerBuildID = contract.CentralBuildIDPrefix + "3"

// versionMarkersRetired reports whether the current workflow task was (or,
// replaying, is recorded as) completed by a worker that takes, without
// recording a check, every path a version check at a notification's start
// would choose: one of generation 2 or later. A worker before it recorded
// the SDK's default build id, a checksum of its binary, and its history
// carries the marker (or, before the change, none) that GetVersion reads.
//
// A task recorded without any build id counts as retired too: a server that
// records none recorded none for older workers either, and the only
// histories the check still tells apart there are those from before the
// first-attempt change (DefaultVersion); version 1's marker, where there is
// one, is skipped on replay and its path is the one taken.
func versionMarkersRetired(ctx workflow.Context) bool {
	return retiresVersionMarkers(workflow.GetInfo(ctx).GetCurrentBuildID())
}

// retiresVersionMarkers is versionMarkersRetired's answer for buildID.
func retiresVersionMarkers(buildID string) bool {
	return buildID == "" || contract.CentralGeneration(buildID) >= 2
}
