package workflows_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/outpost-dev/outpost/activities"
	"github.com/outpost-dev/outpost/activities/onsite"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
	"github.com/outpost-dev/outpost/workflows"
)

type telemetrySuite struct {
	suite.Suite
	testsuite.WorkflowTestSuite
	env *testsuite.TestWorkflowEnvironment
	// settled is what SettleTerminated answers.
	settled contract.SettleTerminatedResult
	// lists and mirrors record the reconciliation's pulls and mirrored pages.
	lists   []contract.ListTrackingChangesInput
	mirrors []contract.MirrorReconciledInput
}

func TestTelemetryWorkflows(t *testing.T) { suite.Run(t, new(telemetrySuite)) }

const telemetrySite = "plant-1"

// seqRow is a tracking row whose last change is seq.
func seqRow(seq int64) contract.TrackedOperation {
	at := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC).Add(time.Duration(seq) * time.Second)
	return contract.TrackedOperation{
		OperationID: fmt.Sprintf("op-%d", seq), Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Status: contract.StatusRetrying, RetryCount: 1, SourceSiteID: telemetrySite, CreatedAt: at, UpdatedAt: at, Seq: seq,
	}
}

func seqRows(from, to int64) []contract.TrackedOperation {
	var rows []contract.TrackedOperation
	for seq := from; seq <= to; seq++ {
		rows = append(rows, seqRow(seq))
	}
	return rows
}

func (s *telemetrySuite) SetupTest() {
	s.env = s.NewTestWorkflowEnvironment()
	s.env.RegisterWorkflowWithOptions(workflows.IngestTelemetryWorkflow, workflow.RegisterOptions{Name: contract.WorkflowIngestTelemetry})
	s.env.RegisterWorkflowWithOptions(workflows.TelemetryIngestWorkflow, workflow.RegisterOptions{Name: contract.WorkflowTelemetryIngest})
	s.env.RegisterWorkflowWithOptions(workflows.ReconcileSiteWorkflow, workflow.RegisterOptions{Name: contract.WorkflowReconcileSite})
	s.env.RegisterActivity(&activities.MirrorActivities{})
	site := &onsite.SiteActivities{}
	s.env.RegisterActivity(site)
	// The pull runs on the site's own queue, nowhere else.
	s.env.SetActivityTaskQueue(contract.SiteTaskQueue(telemetrySite), site.ListTrackingChanges, site.ResolveParkedCall)
	s.env.RegisterActivity(&activities.SettleActivities{})
	s.settled = contract.SettleTerminatedResult{}
	s.env.OnActivity(settleActs.SettleTerminated, mock.Anything, mock.Anything).Return(
		func(context.Context, string) (contract.SettleTerminatedResult, error) { return s.settled, nil })
	s.lists, s.mirrors = nil, nil
}

// A reconciliation run first settles the site's operations whose workflows
// were terminated: each call is discarded on its site (a cancel-like
// discard, since the call may be Retrying).
func (s *telemetrySuite) TestReconcileDiscardsCallsOfTerminatedWorkflows() {
	s.settled = contract.SettleTerminatedResult{Notifications: []string{"n-1"}, Calls: []string{"c-1", "c-2"}}
	var resolved []contract.ResolveParkedCallInput
	s.env.OnActivity(siteActs.ResolveParkedCall, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.ResolveParkedCallInput) (contract.TrackedOperation, error) {
			resolved = append(resolved, in)
			return contract.TrackedOperation{OperationID: in.OperationID, Status: contract.StatusDiscarded}, nil
		})
	s.env.OnActivity(mirrorActs.ReadReconcileCursor, mock.Anything, mock.Anything).Return(int64(0), nil)
	s.env.OnActivity(siteActs.ListTrackingChanges, mock.Anything, mock.Anything).Return([]contract.TrackedOperation{}, nil)
	s.env.ExecuteWorkflow(contract.WorkflowReconcileSite, contract.ReconcileInput{SiteID: telemetrySite})

	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	s.Require().Len(resolved, 2)
	for i, id := range []string{"c-1", "c-2"} {
		s.Equal(id, resolved[i].OperationID)
		s.True(resolved[i].Cancelled)
		s.False(resolved[i].Retry)
		s.Contains(resolved[i].Action.Reason, "workflow terminated")
	}
}

func (s *telemetrySuite) TestIngestMirrorsTheBatch() {
	batch := contract.TelemetryBatch{SiteID: telemetrySite, Rows: seqRows(7, 9)}
	var mirrored [][]contract.TrackedOperation
	s.env.OnActivity(mirrorActs.MirrorSiteCalls, mock.Anything, mock.Anything).Return(
		func(_ context.Context, rows []contract.TrackedOperation) (int, error) {
			mirrored = append(mirrored, rows)
			return 2, nil // one row was already newer in site_calls
		})
	s.env.ExecuteWorkflow(contract.WorkflowIngestTelemetry, batch)

	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var changed int
	s.Require().NoError(s.env.GetWorkflowResult(&changed))
	s.Equal(2, changed, "the mirror's count, not the batch size")
	s.Equal([][]contract.TrackedOperation{batch.Rows}, mirrored, "one bulk upsert of the batch's rows")
}

func (s *telemetrySuite) TestIngestFailsWhenMirrorFails() {
	s.env.OnActivity(mirrorActs.MirrorSiteCalls, mock.Anything, mock.Anything).Return(
		0, temporal.NewNonRetryableApplicationError("site_calls is read-only", "Test", nil))
	s.env.ExecuteWorkflow(contract.WorkflowIngestTelemetry, contract.TelemetryBatch{SiteID: telemetrySite, Rows: seqRows(1, 3)})

	s.Require().True(s.env.IsWorkflowCompleted())
	err := s.env.GetWorkflowError()
	s.Require().Error(err, "the site must keep its outbox when central did not persist the batch")
	s.Contains(err.Error(), "mirror 3 tracking rows of site plant-1")
}

// signalBatches signals batches to the ingest workflow.
func (s *telemetrySuite) signalBatches(batches ...contract.TelemetryBatch) {
	// The test environment queues at most a few hundred callbacks a turn:
	// a hundred signals a millisecond.
	for i, chunk := range slices.Collect(slices.Chunk(batches, 100)) {
		s.env.RegisterDelayedCallback(func() {
			for _, b := range chunk {
				s.env.SignalWorkflow(contract.SignalTelemetryBatch, b)
			}
		}, time.Duration(i)*time.Millisecond)
	}
}

// ingestRecorder answers MirrorTelemetry and MirrorTelemetryBatch and
// records each write's rows.
type ingestRecorder struct {
	// fail answers a write with an error instead, when it returns one.
	fail func(rows []contract.TrackedOperation) error
	// written calls back after each write with the rows written so far.
	written func(rows int)
	writes  [][]contract.TrackedOperation
	rows    int
}

func (s *telemetrySuite) recordMirrors(r *ingestRecorder) *ingestRecorder {
	write := func(batches []converter.RawValue) ([]contract.TelemetryWritten, error) {
		var rows []contract.TrackedOperation
		var written []contract.TelemetryWritten
		for _, raw := range batches {
			b, err := temporalcontract.DecodeTelemetryBatch(raw.Payload())
			s.Require().NoError(err, "a batch reaches the write as the site encoded it")
			rows = append(rows, b.Rows...)
			written = append(written, contract.TelemetryWritten{SiteID: b.SiteID, Seq: b.Rows[len(b.Rows)-1].Seq})
		}
		if r.fail != nil {
			if err := r.fail(rows); err != nil {
				return nil, err
			}
		}
		r.writes = append(r.writes, rows)
		r.rows += len(rows)
		if r.written != nil {
			r.written(r.rows)
		}
		return written, nil
	}
	s.env.OnActivity(mirrorActs.MirrorTelemetry, mock.Anything, mock.Anything).Return(
		func(_ context.Context, batches []converter.RawValue) ([]contract.TelemetryWritten, error) {
			return write(batches)
		})
	s.env.OnActivity(mirrorActs.MirrorTelemetryBatch, mock.Anything, mock.Anything).Return(
		func(_ context.Context, batch converter.RawValue) ([]contract.TelemetryWritten, error) {
			return write([]converter.RawValue{batch})
		})
	return r
}

// runIngest runs the ingest workflow until the test environment's run
// timeout: it never ends by itself.
func (s *telemetrySuite) runIngest() {
	s.env.SetWorkflowRunTimeout(time.Hour)
	s.env.ExecuteWorkflow(contract.WorkflowTelemetryIngest)
	s.Require().True(s.env.IsWorkflowCompleted())
}

func siteBatch(site string, from, to int64) contract.TelemetryBatch {
	rows := seqRows(from, to)
	for i := range rows {
		rows[i].SourceSiteID = site
		rows[i].OperationID = fmt.Sprintf("%s-%s", site, rows[i].OperationID)
	}
	return contract.TelemetryBatch{SiteID: site, Rows: rows}
}

// Batches of several sites that arrive together are written together: one
// store write for all of them.
func (s *telemetrySuite) TestIngestWritesBatchesThatArriveTogetherAtOnce() {
	a, b, c := siteBatch("plant-1", 1, 3), siteBatch("plant-2", 1, 2), siteBatch("plant-1", 4, 4)
	rec := s.recordMirrors(&ingestRecorder{})
	s.signalBatches(a, b, c)
	s.runIngest()

	all := slices.Concat(a.Rows, b.Rows, c.Rows)
	s.Equal([][]contract.TrackedOperation{all}, rec.writes, "one write of every batch, in the order they arrived")
}

// Batches that arrive together are written together up to 1 MiB of them,
// as the sites encoded them, a write: a fleet's backlog is not held in
// memory all at once.
func (s *telemetrySuite) TestIngestBoundsTheBytesOfOneWrite() {
	a, b, c := siteBatch("plant-1", 1, 2500), siteBatch("plant-2", 1, 2500), siteBatch("plant-3", 1, 2500)
	encoded, err := converter.GetDefaultDataConverter().ToPayload(a)
	s.Require().NoError(err)
	s.Require().Less(len(encoded.Data), 1<<20, "one batch is under the bound")
	s.Require().GreaterOrEqual(2*len(encoded.Data), 1<<20, "and two reach it")

	rec := s.recordMirrors(&ingestRecorder{})
	s.signalBatches(a, b, c)
	s.runIngest()

	s.Equal([][]contract.TrackedOperation{slices.Concat(a.Rows, b.Rows), c.Rows}, rec.writes,
		"the write stops taking batches once it holds 1 MiB")
}

// Compressed batches are bounded by their JSON, not by the bytes they came
// in: what a write holds once it decodes them is their JSON and rows.
func (s *telemetrySuite) TestIngestBoundsCompressedBatchesByTheirJSON() {
	a, b, c := siteBatch("plant-1", 1, 2500), siteBatch("plant-2", 1, 2500), siteBatch("plant-3", 1, 2500)
	var compressed []any
	for _, batch := range []contract.TelemetryBatch{a, b, c} {
		encoded, err := temporalcontract.EncodeTelemetryBatch(batch)
		s.Require().NoError(err)
		s.Require().Less(3*len(encoded.Payload().GetData()), 1<<20, "all three come in under the bound")
		compressed = append(compressed, encoded)
	}

	rec := s.recordMirrors(&ingestRecorder{})
	s.env.RegisterDelayedCallback(func() {
		for _, batch := range compressed {
			s.env.SignalWorkflow(contract.SignalTelemetryBatch, batch)
		}
	}, 0)
	s.runIngest()

	s.Equal([][]contract.TrackedOperation{slices.Concat(a.Rows, b.Rows), c.Rows}, rec.writes,
		"the write stops taking batches once their JSON reaches 1 MiB")
}

// The ingest answers each site's last change written: how a site learns
// that it may forget its batch and send the next.
func (s *telemetrySuite) TestIngestAnswersWhatItWrote() {
	s.recordMirrors(&ingestRecorder{})
	s.signalBatches(siteBatch("plant-1", 1, 3), siteBatch("plant-2", 1, 2), siteBatch("plant-1", 4, 4))
	written := map[string]int64{}
	s.env.RegisterDelayedCallback(func() {
		for _, site := range []string{"plant-1", "plant-2", "plant-9"} {
			v, err := s.env.QueryWorkflow(contract.QueryTelemetryWritten, site)
			s.Require().NoError(err)
			var seq int64
			s.Require().NoError(v.Get(&seq))
			written[site] = seq
		}
	}, time.Minute)
	s.runIngest()

	s.Equal(map[string]int64{"plant-1": 4, "plant-2": 2, "plant-9": 0}, written)
}

// A run continues as new after batchesPerIngestRun batches, and only once
// every batch signalled to it is written, those that arrived during its
// last write included.
func (s *telemetrySuite) TestIngestContinuesAsNewWithNothingUnwritten() {
	var batches []contract.TelemetryBatch
	for i := range int64(1000) {
		batches = append(batches, siteBatch(fmt.Sprintf("plant-%d", i%7), i+1, i+1))
	}
	late := []contract.TelemetryBatch{siteBatch("plant-late", 1, 2), siteBatch("plant-late", 3, 3)}
	rec := s.recordMirrors(&ingestRecorder{written: func(rows int) {
		if rows == 1000 { // during the write that fills the run
			for _, b := range late {
				s.env.SignalWorkflow(contract.SignalTelemetryBatch, b)
			}
		}
	}})
	s.signalBatches(batches...)
	s.runIngest()

	var canErr *workflow.ContinueAsNewError
	s.Require().ErrorAs(s.env.GetWorkflowError(), &canErr)
	s.Equal(1003, rec.rows, "every batch written before the run continued as new, the late ones too")
}

// While the store fails, the ingest writes batch by batch and waits for the
// store; a batch the store refuses for good is left to reconciliation, and
// the other batches are written all the same.
func (s *telemetrySuite) TestIngestWaitsForTheStoreAndSkipsARefusedBatch() {
	good1, bad, good2 := siteBatch("plant-1", 1, 2), siteBatch("plant-bad", 1, 1), siteBatch("plant-2", 1, 2)
	failures := 0
	rec := s.recordMirrors(&ingestRecorder{
		fail: func(rows []contract.TrackedOperation) error {
			switch {
			case rows[0].SourceSiteID == "plant-bad" || len(rows) == 5 && failures >= 3:
				return temporal.NewNonRetryableApplicationError("row refused", "Test", nil)
			case failures < 3:
				failures++
				return errors.New("database is down")
			}
			return nil
		},
	})
	s.signalBatches(good1, bad, good2)
	s.runIngest()

	s.Require().ErrorContains(s.env.GetWorkflowError(), "deadline exceeded", "a refused batch does not fail the run: it runs on")
	s.Equal([][]contract.TrackedOperation{good1.Rows, good2.Rows}, rec.writes)
}

// onReconcile mocks central's cursor, the site's pages (answered by the
// cursor asked for) and central's mirror.
func (s *telemetrySuite) onReconcile(cursor int64, pages map[int64][]contract.TrackedOperation) {
	s.env.OnActivity(mirrorActs.ReadReconcileCursor, mock.Anything, telemetrySite).Return(cursor, nil).Once()
	s.env.OnActivity(siteActs.ListTrackingChanges, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.ListTrackingChangesInput) ([]contract.TrackedOperation, error) {
			s.lists = append(s.lists, in)
			if len(s.lists) > 100 {
				return nil, temporal.NewNonRetryableApplicationError("runaway pulling", "Test", nil)
			}
			return pages[in.After], nil
		})
	s.env.OnActivity(mirrorActs.MirrorReconciled, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.MirrorReconciledInput) error {
			s.mirrors = append(s.mirrors, in)
			return nil
		})
}

func (s *telemetrySuite) reconcileResult() contract.ReconcileResult {
	s.Require().True(s.env.IsWorkflowCompleted())
	s.Require().NoError(s.env.GetWorkflowError())
	var res contract.ReconcileResult
	s.Require().NoError(s.env.GetWorkflowResult(&res))
	return res
}

func (s *telemetrySuite) TestReconcilePagesFromCursorUntilAShortPage() {
	s.onReconcile(5, map[int64][]contract.TrackedOperation{
		5: seqRows(6, 8),
		8: seqRows(9, 11),
		// Seqs need not be contiguous: purged rows leave gaps.
		11: {seqRow(14)},
	})
	s.env.ExecuteWorkflow(contract.WorkflowReconcileSite, contract.ReconcileInput{SiteID: telemetrySite, PageSize: 3})

	s.Equal(contract.ReconcileResult{Rows: 7, Cursor: 14}, s.reconcileResult())
	s.Equal([]contract.ListTrackingChangesInput{{After: 5, Limit: 3}, {After: 8, Limit: 3}, {After: 11, Limit: 3}}, s.lists,
		"a short page ends the run without another pull")
	s.Equal([]contract.MirrorReconciledInput{
		{SiteID: telemetrySite, Rows: seqRows(6, 8), Cursor: 8},
		{SiteID: telemetrySite, Rows: seqRows(9, 11), Cursor: 11},
		{SiteID: telemetrySite, Rows: []contract.TrackedOperation{seqRow(14)}, Cursor: 14},
	}, s.mirrors)
}

func (s *telemetrySuite) TestReconcileEmptyFirstPageMirrorsNothing() {
	s.onReconcile(5, nil)
	s.env.ExecuteWorkflow(contract.WorkflowReconcileSite, contract.ReconcileInput{SiteID: telemetrySite})

	s.Equal(contract.ReconcileResult{Rows: 0, Cursor: 5}, s.reconcileResult())
	s.Equal([]contract.ListTrackingChangesInput{{After: 5, Limit: 200}}, s.lists, "PageSize defaults to 200")
	s.Empty(s.mirrors)
	s.env.AssertNotCalled(s.T(), nameOf(mirrorActs.MirrorReconciled), mock.Anything, mock.Anything)
}

// A full page followed by an empty one: the empty pull ends the run.
func (s *telemetrySuite) TestReconcileFullPageThenEmpty() {
	s.onReconcile(0, map[int64][]contract.TrackedOperation{0: seqRows(1, 2)})
	s.env.ExecuteWorkflow(contract.WorkflowReconcileSite, contract.ReconcileInput{SiteID: telemetrySite, PageSize: 2})

	s.Equal(contract.ReconcileResult{Rows: 2, Cursor: 2}, s.reconcileResult())
	s.Equal([]contract.ListTrackingChangesInput{{After: 0, Limit: 2}, {After: 2, Limit: 2}}, s.lists)
	s.Len(s.mirrors, 1)
}

// A long backlog continues as new after 50 full pages, so one run's history
// stays bounded; the next run starts from the mirrored cursor.
func (s *telemetrySuite) TestReconcileContinuesAsNewAfterFiftyFullPages() {
	pages := map[int64][]contract.TrackedOperation{}
	for after := int64(5); after < 200; after++ {
		pages[after] = seqRows(after+1, after+1)
	}
	s.onReconcile(5, pages)
	s.env.ExecuteWorkflow(contract.WorkflowReconcileSite, contract.ReconcileInput{SiteID: telemetrySite, PageSize: 1})

	s.Require().True(s.env.IsWorkflowCompleted())
	err := s.env.GetWorkflowError()
	var can *workflow.ContinueAsNewError
	s.Require().True(errors.As(err, &can), "want continue-as-new, got %v", err)
	s.Len(s.lists, 50)
	s.Require().Len(s.mirrors, 50)
	for i, m := range s.mirrors {
		s.Equal(int64(6+i), m.Cursor)
	}
}

// A site whose store was replaced numbers its changes from 1 again: a pull
// after central's old cursor is refused, central resets its cursor and
// pulls from the start.
func (s *telemetrySuite) TestReconcileStartsOverWhenTheSiteStoreWasReplaced() {
	s.env.OnActivity(mirrorActs.ReadReconcileCursor, mock.Anything, telemetrySite).Return(int64(500), nil).Once()
	s.env.OnActivity(siteActs.ListTrackingChanges, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.ListTrackingChangesInput) ([]contract.TrackedOperation, error) {
			s.lists = append(s.lists, in)
			if in.After > 3 {
				return nil, temporal.NewNonRetryableApplicationError("cursor is past this site's last change 3", contract.ErrTypeCursorAhead, nil)
			}
			return seqRows(in.After+1, 3), nil
		})
	var resets []string
	s.env.OnActivity(mirrorActs.ResetReconcileCursor, mock.Anything, mock.Anything).Return(
		func(_ context.Context, site string) error {
			resets = append(resets, site)
			return nil
		})
	s.env.OnActivity(mirrorActs.MirrorReconciled, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in contract.MirrorReconciledInput) error {
			s.mirrors = append(s.mirrors, in)
			return nil
		})
	s.env.ExecuteWorkflow(contract.WorkflowReconcileSite, contract.ReconcileInput{SiteID: telemetrySite, PageSize: 10})

	s.Equal(contract.ReconcileResult{Rows: 3, Cursor: 3}, s.reconcileResult())
	s.Equal([]string{telemetrySite}, resets)
	s.Equal([]contract.ListTrackingChangesInput{{After: 500, Limit: 10}, {After: 0, Limit: 10}}, s.lists)
	s.Equal([]contract.MirrorReconciledInput{{SiteID: telemetrySite, Rows: seqRows(1, 3), Cursor: 3}}, s.mirrors)
}

func (s *telemetrySuite) TestReconcileFailsWhenTheSiteCannotBeReached() {
	s.env.OnActivity(mirrorActs.ReadReconcileCursor, mock.Anything, telemetrySite).Return(int64(5), nil).Once()
	s.env.OnActivity(siteActs.ListTrackingChanges, mock.Anything, mock.Anything).Return(
		[]contract.TrackedOperation(nil), errors.New("site unreachable"))
	s.env.ExecuteWorkflow(contract.WorkflowReconcileSite, contract.ReconcileInput{SiteID: telemetrySite})

	s.Require().True(s.env.IsWorkflowCompleted())
	err := s.env.GetWorkflowError()
	s.Require().Error(err)
	s.Contains(err.Error(), "pull tracking changes of site plant-1 after 5")
	s.env.AssertNumberOfCalls(s.T(), nameOf(siteActs.ListTrackingChanges), 3)
	s.env.AssertNotCalled(s.T(), nameOf(mirrorActs.MirrorReconciled), mock.Anything, mock.Anything)
}
