package operation

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// WorkerBuildID is the build id central workers run under
// (worker.Options.BuildID). Temporal records the build id of the worker that
// completed each workflow task in its WorkflowTaskCompleted event, so a
// workflow can tell, the same way on every replay, which generation of this
// code made a decision: workflow.GetInfo(ctx).GetCurrentBuildID() is the
// running worker's id in a new task and the recorded one in a replayed task.
//
// Generation 2 drops the version check at a notification's start
// (changeRecordInFirstAttempt, in package notification): its GetVersion
// call recorded a marker and upserted TemporalChangeVersion, one more
// visibility write for every notification, for a path every worker since
// has taken. Generation 3 runs contract.WorkflowNotificationStarted, and
// sites look for it in the build ids of the workers polling
// contract.CentralTaskQueue before they start notifications that way.
// Generation 4 makes a notification's first attempt a local activity
// (generationFirstAttemptLocal, in package notification) and runs
// contract.WorkflowCachedCallStarted, which sites look for the same way
// (contract.GenerationStartsCalls). Generation 5 runs
// contract.WorkflowTelemetryIngest, which sites then send their telemetry
// to by update (contract.GenerationTelemetryIngest), and leaves out the
// search-attribute upsert of a Delivered that never left the happy path
// (generationQuietDelivery). Generation 6 takes telemetry batches
// compressed (temporalcontract.EncodeTelemetryBatch), which sites send
// once every worker polling knows it (contract.GenerationCompressedTelemetry).
// Raise the number when a change must tell workers of this code from
// workers before it.
const WorkerBuildID = contract.CentralBuildIDPrefix + "6"

// generationQuietDelivery is the first generation that does not upsert
// OutpostStatus=Delivered on a workflow whose attribute still reads
// Pending, the value the site set at start: a billed action and a
// visibility write saved on every operation delivered without trouble. Such
// a workflow is found by ExecutionStatus="Completed"; one that was ever
// Retrying or Parked reads Delivered at its end as before.
const generationQuietDelivery = 5

// TaskGeneration is the generation of this code that completed the current
// workflow task, or that completes it now (see WorkerBuildID): what a
// decision taken in the task may depend on, the same on every replay.
func TaskGeneration(ctx workflow.Context) int {
	return generationOf(workflow.GetInfo(ctx).GetCurrentBuildID())
}

// generationOf is the generation a recorded build id names. An older
// worker recorded the SDK's default build id, a checksum of its binary:
// generation 0, before any of them.
//
// A task recorded without any build id counts as generation 3. A server
// that records none recorded none for older workers either, so the history
// must choose the same path whichever worker wrote it: past the version
// check of generation 2 (the histories from before it still carry the
// marker GetVersion reads, or none, which version 1's path skips on
// replay: DefaultVersion's), but not the local first attempt of generation
// 4, which a generation-3 worker on such a server may not have taken.
func generationOf(buildID string) int {
	if buildID == "" {
		return 3
	}
	return contract.CentralGeneration(buildID)
}

// deliveryQuiet reports whether a workflow task of generation leaves out
// the OutpostStatus upsert of a Delivered that never left the happy path.
func deliveryQuiet(generation int) bool { return generation >= generationQuietDelivery }

// SetStatusAttr upserts OutpostStatus=status, unless the current task's
// generation is deliveryQuiet: then a Delivered on a workflow whose
// attribute still reads Pending is left unannounced (the attribute and the
// workflow's completion say it).
func SetStatusAttr(ctx workflow.Context, status contract.Status, generation int) error {
	if status == contract.StatusDelivered && shownStatus(ctx) == contract.StatusPending && deliveryQuiet(generation) {
		return nil
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, temporalcontract.AttrStatus.ValueSet(string(status))); err != nil {
		return fmt.Errorf("set %s: %w", temporalcontract.AttrStatus.GetName(), err)
	}
	return nil
}

// shownStatus is the workflow's OutpostStatus as the start set it or the
// last upsert changed it; empty when it has none (a workflow started by an
// older site).
func shownStatus(ctx workflow.Context) contract.Status {
	status, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(temporalcontract.AttrStatus)
	return contract.Status(status)
}
