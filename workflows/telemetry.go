package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
	"github.com/outpost-dev/outpost/workflows/operation"
)

// terminatedAction is the discard reconciliation applies to an operation
// whose workflow was terminated: a terminated workflow runs no code, so
// nothing else would ever settle it.
var terminatedAction = contract.OperatorAction{Reason: "workflow terminated (Web UI Terminate or temporal workflow terminate) before the operation finished; discarded by reconciliation"}

// changeSettleTerminated versions the settling of terminated workflows'
// operations at the start of ReconcileSiteWorkflow.
const changeSettleTerminated = "settle-terminated"

// settleTerminated discards the site's operations whose workflows were
// terminated while Pending, Retrying or Parked: notifications on central
// (by the activity), calls on the site.
func settleTerminated(ctx workflow.Context, siteID string, siteCtx workflow.Context) error {
	var found contract.SettleTerminatedResult
	if err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), settleActs.SettleTerminated, siteID).Get(ctx, &found); err != nil {
		return fmt.Errorf("settle terminated operations of site %s: %w", siteID, err)
	}
	for _, id := range found.Calls {
		in := contract.ResolveParkedCallInput{OperationID: id, Action: terminatedAction, Cancelled: true}
		if err := workflow.ExecuteActivity(siteCtx, siteActs.ResolveParkedCall, in).Get(ctx, nil); err != nil {
			return fmt.Errorf("discard call %s of terminated workflow on site %s: %w", id, siteID, err)
		}
	}
	if n := len(found.Notifications) + len(found.Calls); n > 0 {
		workflow.GetLogger(ctx).Info("settled operations of terminated workflows", "site", siteID,
			"notifications", len(found.Notifications), "calls", len(found.Calls))
	}
	return nil
}

// IngestTelemetryWorkflow persists one telemetry batch in site_calls with one
// bulk upsert. The site waits for its result: only then do the events leave
// the site's outbox.
func IngestTelemetryWorkflow(ctx workflow.Context, batch contract.TelemetryBatch) (int, error) {
	var changed int
	if err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), mirrorActs.MirrorSiteCalls, batch.Rows).Get(ctx, &changed); err != nil {
		return 0, fmt.Errorf("mirror %d tracking rows of site %s: %w", len(batch.Rows), batch.SiteID, err)
	}
	return changed, nil
}

// batchesPerIngestRun bounds one TelemetryIngestWorkflow run's history: a
// signal is an event, so after this many batches the run continues as new.
const batchesPerIngestRun = 1000

// bytesPerIngestWrite bounds one write's batches, by their JSON
// (temporalcontract.TelemetryBatchSize, whether they came compressed or
// not): about 2,400 of a fleet's tracking changes, half of what a worker
// decodes at once (activities.TelemetryBudgetBytes), so the writes of
// several shards share it. A write of every batch waiting would hold
// all their rows, SQL arguments and audit events in the worker's memory at
// once. A batch not yet taken stays in the signal channel until its turn.
const bytesPerIngestWrite = 1 << 20

// changeEncodedBatches versions TelemetryIngestWorkflow's writes: from
// version 1 the workflow keeps its batches encoded and the write decodes
// them within the worker's telemetry budget (mirrorActs.MirrorTelemetry).
// A run of the default version decodes them itself (ingestDecoded).
const changeEncodedBatches = "encoded-telemetry-batches"

// TelemetryIngestWorkflow takes the telemetry batches sites signal to it
// (contract.SignalTelemetryBatch) and writes every batch waiting, up to
// bytesPerIngestWrite, in one central-store write: with many sites
// sending at once, one workflow task and one transaction carry many
// batches, where IngestTelemetryWorkflow costs a workflow and a
// transaction each. The batches stay encoded in the workflow: the write
// (a local activity) decodes them, and each worker process decodes and
// writes at most activities.TelemetryBudgetBytes of them at once, however
// many shards it runs. A site learns that its batch is written from the
// query contract.QueryTelemetryWritten, and only then forgets it and sends
// its next: so a run holds at most one unwritten batch per site, and a
// cancelled or terminated run loses nothing (the sites send again). A
// failing store is waited for (operation.StoreWrite); the run continues as
// new only with nothing left unwritten.
//
// It has no input: contract.TelemetryIngestWorkflowID names its shard.
func TelemetryIngestWorkflow(ctx workflow.Context) error {
	in := &ingest{written: map[string]int64{}}
	if err := workflow.SetQueryHandler(ctx, contract.QueryTelemetryWritten, in.writtenOf); err != nil {
		return fmt.Errorf("register query %s: %w", contract.QueryTelemetryWritten, err)
	}
	in.batches = workflow.GetSignalChannel(ctx, contract.SignalTelemetryBatch)
	if workflow.GetVersion(ctx, changeEncodedBatches, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		(*ingestDecoded)(in).run(ctx)
		return workflow.NewContinueAsNewError(ctx, TelemetryIngestWorkflow)
	}
	for taken := 0; taken < batchesPerIngestRun && !workflow.GetInfo(ctx).GetContinueAsNewSuggested(); {
		var first converter.RawValue
		in.batches.Receive(ctx, &first)
		taken += in.write(ctx, append([]converter.RawValue{first}, in.waiting(jsonSize(first))...))
	}
	// Batches signalled during the last write belong to this run: a run
	// that continued as new without them would drop them.
	for arrived := in.waiting(0); len(arrived) > 0; arrived = in.waiting(0) {
		in.write(ctx, arrived)
	}
	return workflow.NewContinueAsNewError(ctx, TelemetryIngestWorkflow)
}

// ingest is a TelemetryIngestWorkflow run: its signal channel and, by
// site, the last change number it wrote.
type ingest struct {
	batches workflow.ReceiveChannel
	written map[string]int64
}

// writtenOf answers QueryTelemetryWritten: the last change number of site
// this run wrote, 0 if none.
func (in *ingest) writtenOf(site string) (int64, error) { return in.written[site], nil }

// waiting takes batches already signalled, without blocking, while they
// and taken bytes stay within bytesPerIngestWrite.
func (in *ingest) waiting(taken int) []converter.RawValue {
	return receiveWaiting(in.batches, taken, bytesPerIngestWrite, jsonSize)
}

// receiveWaiting takes what ch already holds, without blocking, while its
// size and taken stay under limit.
func receiveWaiting[T any](ch workflow.ReceiveChannel, taken, limit int, size func(T) int) []T {
	var waiting []T
	for taken < limit {
		var v T
		if !ch.ReceiveAsync(&v) {
			return waiting
		}
		waiting = append(waiting, v)
		taken += size(v)
	}
	return waiting
}

// jsonSize is the bytes of a batch's JSON, however it came
// (temporalcontract.TelemetryBatchSize).
func jsonSize(batch converter.RawValue) int {
	return temporalcontract.TelemetryBatchSize(batch.Payload())
}

// write writes batches and records each site's last change written; it
// returns how many batches it wrote.
func (in *ingest) write(ctx workflow.Context, batches []converter.RawValue) int {
	for _, w := range mirrorEncoded(ctx, batches) {
		in.written[w.SiteID] = max(in.written[w.SiteID], w.Seq)
	}
	return len(batches)
}

// mirrorEncoded writes batches' rows to central's site_calls with their
// audit events and returns each site's last change written: all in one
// local activity while the store answers; after that fails, batch by
// batch through operation.StoreWrite, which waits for the store however
// long it is away (an activity's input is kept in the history, and each
// batch is within Temporal's size limit where all of them may not be). A
// batch the store refuses for good is logged and left to reconciliation,
// which pulls its rows from the site again: failing the run would fail
// every other batch sent to it.
func mirrorEncoded(ctx workflow.Context, batches []converter.RawValue) []contract.TelemetryWritten {
	var written []contract.TelemetryWritten
	err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), mirrorActs.MirrorTelemetry, batches).Get(ctx, &written)
	if err == nil {
		return written
	}
	log := workflow.GetLogger(ctx)
	log.Warn("telemetry write failing; writing batch by batch until the store answers",
		"batches", len(batches), "error", err)
	for i, b := range batches {
		var one []contract.TelemetryWritten
		if err := operation.StoreWrite(ctx, mirrorActs.MirrorTelemetryBatch, b, &one); err != nil {
			log.Error("central store refused a telemetry batch; the site's reconciliation will pull its rows again",
				"batch", i+1, "of", len(batches), "bytes", jsonSize(b), "error", err)
			continue
		}
		written = append(written, one...)
	}
	return written
}

// rowsPerDecodedWrite bounds one write's rows in a run of the default
// version of changeEncodedBatches.
const rowsPerDecodedWrite = 5000

// ingestDecoded is a TelemetryIngestWorkflow run of the default version of
// changeEncodedBatches, started before its writes decoded the batches: it
// decodes each batch as it takes it, and replays as it ran.
type ingestDecoded ingest

// run writes the batches signalled, up to batchesPerIngestRun, and those
// that arrived during its last write.
func (in *ingestDecoded) run(ctx workflow.Context) {
	for taken := 0; taken < batchesPerIngestRun && !workflow.GetInfo(ctx).GetContinueAsNewSuggested(); {
		var first contract.TelemetryBatch
		in.batches.Receive(ctx, &first)
		taken += in.write(ctx, append([]contract.TelemetryBatch{first}, in.waiting(len(first.Rows))...))
	}
	for arrived := in.waiting(0); len(arrived) > 0; arrived = in.waiting(0) {
		in.write(ctx, arrived)
	}
}

// waiting takes batches already signalled, without blocking, while they
// and taken rows stay within rowsPerDecodedWrite.
func (in *ingestDecoded) waiting(taken int) []contract.TelemetryBatch {
	return receiveWaiting(in.batches, taken, rowsPerDecodedWrite, func(b contract.TelemetryBatch) int { return len(b.Rows) })
}

// write writes batches and records each site's last change written; it
// returns how many batches it wrote.
func (in *ingestDecoded) write(ctx workflow.Context, batches []contract.TelemetryBatch) int {
	mirrorBatches(ctx, batches)
	for _, b := range batches {
		if len(b.Rows) > 0 {
			in.written[b.SiteID] = max(in.written[b.SiteID], b.Rows[len(b.Rows)-1].Seq)
		}
	}
	return len(batches)
}

// mirrorBatches is mirrorEncoded for decoded batches: one local activity
// of all their rows, then batch by batch through operation.StoreWrite.
func mirrorBatches(ctx workflow.Context, batches []contract.TelemetryBatch) {
	var rows []contract.TrackedOperation
	for _, b := range batches {
		rows = append(rows, b.Rows...)
	}
	err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), mirrorActs.MirrorSiteCalls, rows).Get(ctx, nil)
	if err == nil {
		return
	}
	log := workflow.GetLogger(ctx)
	log.Warn("telemetry write failing; writing batch by batch until the store answers",
		"batches", len(batches), "changes", len(rows), "error", err)
	for _, b := range batches {
		if err := operation.StoreWrite(ctx, mirrorActs.MirrorSiteCalls, b.Rows, nil); err != nil {
			log.Error("central store refused a telemetry batch; the site's reconciliation will pull its rows again",
				"site", b.SiteID, "changes", len(b.Rows), "error", err)
		}
	}
}

// pagesPerRun bounds one reconciliation run's history; a longer backlog
// continues as new.
const pagesPerRun = 50

// ReconcileSiteWorkflow pulls a site's tracking rows changed since central's
// cursor (an activity on the site's queue) and mirrors them, page by page,
// healing anything telemetry missed. A Temporal Schedule runs it per site.
func ReconcileSiteWorkflow(ctx workflow.Context, in contract.ReconcileInput) (contract.ReconcileResult, error) {
	if in.PageSize <= 0 {
		in.PageSize = 200
	}
	var res contract.ReconcileResult
	if err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), mirrorActs.ReadReconcileCursor, in.SiteID).Get(ctx, &res.Cursor); err != nil {
		return res, fmt.Errorf("read reconcile cursor of site %s: %w", in.SiteID, err)
	}
	siteCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: contract.SiteTaskQueue(in.SiteID),
		// An unreachable site fails this run; the next scheduled run tries again.
		ScheduleToCloseTimeout: 2 * time.Minute,
		StartToCloseTimeout:    30 * time.Second,
		RetryPolicy:            &temporal.RetryPolicy{InitialInterval: 5 * time.Second, MaximumAttempts: 3},
	})
	if workflow.GetVersion(ctx, changeSettleTerminated, workflow.DefaultVersion, 1) == 1 {
		if err := settleTerminated(ctx, in.SiteID, siteCtx); err != nil {
			return res, err
		}
	}
	for page := 0; page < pagesPerRun; page++ {
		var rows []contract.TrackedOperation
		err := workflow.ExecuteActivity(siteCtx, siteActs.ListTrackingChanges,
			contract.ListTrackingChangesInput{After: res.Cursor, Limit: in.PageSize}).Get(ctx, &rows)
		if isCursorAhead(err) && res.Cursor > 0 {
			if err := resetCursor(ctx, in.SiteID, res.Cursor); err != nil {
				return res, err
			}
			res.Cursor = 0
			continue
		}
		if err != nil {
			return res, fmt.Errorf("pull tracking changes of site %s after %d: %w", in.SiteID, res.Cursor, err)
		}
		if len(rows) == 0 {
			return res, nil
		}
		cursor := rows[len(rows)-1].Seq
		mirror := contract.MirrorReconciledInput{SiteID: in.SiteID, Rows: rows, Cursor: cursor}
		if err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), mirrorActs.MirrorReconciled, mirror).Get(ctx, nil); err != nil {
			return res, fmt.Errorf("mirror reconciled rows of site %s: %w", in.SiteID, err)
		}
		res.Rows += len(rows)
		res.Cursor = cursor
		if len(rows) < in.PageSize {
			return res, nil
		}
	}
	return res, workflow.NewContinueAsNewError(ctx, ReconcileSiteWorkflow, in)
}

func isCursorAhead(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == contract.ErrTypeCursorAhead
}

// resetCursor starts a site's reconciliation over: its store was replaced,
// so central's cursor counts changes of a file that is gone.
func resetCursor(ctx workflow.Context, siteID string, stale int64) error {
	workflow.GetLogger(ctx).Warn("site's change numbers are behind central's cursor (store replaced?); reconciling from the start",
		"site", siteID, "cursor", stale)
	if err := workflow.ExecuteLocalActivity(operation.StoreContext(ctx), mirrorActs.ResetReconcileCursor, siteID).Get(ctx, nil); err != nil {
		return fmt.Errorf("reset reconcile cursor of site %s: %w", siteID, err)
	}
	return nil
}
