package sitedaemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// TelemetryOptions tunes the telemetry sender (site config).
type TelemetryOptions struct {
	SiteID string
	// Region is the region whose central ingests the batches.
	Region contract.Region
	// Batch is the most changes per batch; a full batch goes at once.
	Batch int
	// Delay is the longest a change waits for its batch to fill.
	Delay time.Duration
}

// Telemetry sends tracking-row changes to central's site_calls in batches.
// Its outbox is the store's tracking_changes: every change takes the next
// change number and is kept as the row stood after it, and the sender's
// cursor moves past a batch (forgetting it) only after central has
// persisted it. Nothing is lost while central is away, not even a state
// overtaken before the next send: central audits every attempt.
type Telemetry struct {
	store *sitestore.Store
	opts  TelemetryOptions
	log   *zap.Logger
	// send delivers one batch and returns once Temporal or central has it
	// for good; tests replace it.
	send func(context.Context, contract.TelemetryBatch) error
	// batches counts round trips done: batches central persisted and the
	// cursor moved past.
	batches atomic.Int64
	// attempts counts every send, failed ones included.
	attempts atomic.Int64

	// Owned by Run's goroutine.
	failing bool
	// since is when the sender first saw the unsent changes after its last
	// send; zero while it knows of none.
	since time.Time
	// retryAt is when a failed send may be tried again.
	retryAt time.Time
}

// NewTelemetry returns a sender over store.
func NewTelemetry(store *sitestore.Store, tc client.Client, opts TelemetryOptions, log *zap.Logger) *Telemetry {
	t := &Telemetry{store: store, opts: opts, log: log}
	starts := newStartCheck(tc, opts.Region.TaskQueue(), log)
	ingest := NewIngestSender(tc, opts.Region)
	t.send = func(ctx context.Context, batch contract.TelemetryBatch) error {
		if starts.sendsToTelemetryIngest(ctx) {
			return ingest.Send(ctx, batch, starts.compressesTelemetry(ctx))
		}
		return ingestTelemetryByWorkflow(ctx, tc, opts.Region, batch)
	}
	return t
}

// Batches is how many batches central has persisted since start, each
// counted once the cursor moved past it: whoever sees the count also sees
// the cursor.
func (t *Telemetry) Batches() int64 { return t.batches.Load() }

// Attempts is how many batches were sent since start, failed sends included.
func (t *Telemetry) Attempts() int64 { return t.attempts.Load() }

// Run sends until ctx ends. A batch goes as soon as Batch changes wait, or
// once the sender has known of fewer for Delay; after a failed send nothing
// goes for Delay.
func (t *Telemetry) Run(ctx context.Context) error {
	wake := time.NewTimer(0)
	defer wake.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.store.TrackingChanged():
		case <-wake.C:
		}
		wake.Reset(t.step(ctx))
	}
}

// step sends one batch if one is due and returns how long to wait before
// looking again.
func (t *Telemetry) step(ctx context.Context) time.Duration {
	waiting, err := t.store.TelemetryBacklog(ctx, t.opts.Batch)
	if err != nil {
		t.noteOutcome(err)
		return t.opts.Delay
	}
	now := time.Now()
	switch {
	case waiting == 0:
		t.since = time.Time{}
	case t.since.IsZero():
		t.since = now
	}
	if wait := t.untilDue(now, waiting); wait > 0 {
		return wait
	}
	cut, err := t.sendBatch(ctx)
	for cut && err == nil { // what a batch cut short by its bytes left was due too
		cut, err = t.sendBatch(ctx)
	}
	t.noteOutcome(err)
	if err != nil {
		t.retryAt = time.Now().Add(t.opts.Delay)
		return t.opts.Delay
	}
	// What is left arrived during the send: it is timed from now, and goes
	// at once only if it fills a batch.
	t.since = time.Time{}
	return 0
}

// untilDue is how long the waiting changes (counted up to Batch) may still
// wait; zero sends them now. With none waiting it is Delay: changes that
// other processes commit are not signalled, so the sender looks for them
// that often (they may wait up to twice Delay).
func (t *Telemetry) untilDue(now time.Time, waiting int) time.Duration {
	switch {
	case waiting == 0:
		return t.opts.Delay
	case now.Before(t.retryAt):
		return t.retryAt.Sub(now)
	case waiting >= t.opts.Batch:
		return 0
	default:
		return max(t.since.Add(t.opts.Delay).Sub(now), 0)
	}
}

// sendBatch sends the oldest unsent changes, up to Batch and
// contract.TelemetryMaxBytes, and moves the cursor past them once central
// persisted them. cut: the bytes bound left some of them for the next.
func (t *Telemetry) sendBatch(ctx context.Context) (cut bool, err error) {
	cursor, err := t.store.TelemetryCursor(ctx)
	if err != nil {
		return false, err
	}
	read, err := t.store.TelemetryChanges(ctx, cursor, t.opts.Batch)
	if err != nil || len(read) == 0 {
		return false, err
	}
	rows := fitBytes(read, contract.TelemetryMaxBytes)
	t.attempts.Add(1)
	if err := t.send(ctx, contract.TelemetryBatch{SiteID: t.opts.SiteID, Rows: rows}); err != nil {
		return false, err
	}
	if err := t.store.AdvanceTelemetryCursor(ctx, rows[len(rows)-1].Seq); err != nil {
		return false, err
	}
	t.batches.Add(1)
	return len(rows) < len(read), nil
}

// fitBytes is the longest prefix of rows, one row at least, whose JSON
// stays within max bytes.
func fitBytes(rows []contract.TrackedOperation, max int) []contract.TrackedOperation {
	size := 64 // the batch's site id and brackets
	for i, row := range rows {
		encoded, err := json.Marshal(row)
		if err != nil { // not for these fields; let the send report it
			return rows
		}
		size += len(encoded) + 1
		if size > max && i > 0 {
			return rows[:i]
		}
	}
	return rows
}

// IngestSender sends one site's batches to its region's ingest workflow
// (contract.Region.TelemetryIngestWorkflowID) on the region's task queue,
// one at a time, and returns once central wrote each. A resend of the same
// batch writes nothing twice (a row is kept only when it is newer, and
// audit event ids are fixed).
//
// It remembers a batch signalled but not yet known to be written (central's
// worker away, a timeout), so that the next send asks about that one first
// instead of signalling again: while central is away, a site adds nothing
// to the workflow's history. And it remembers how long central took to
// write its last batch, so that it asks about the next one about when it
// should be written: each question is a query, a round trip through
// Temporal to the workflow's worker, and a busy central asked every few
// milliseconds by every site spent half its time answering.
type IngestSender struct {
	tc     client.Client
	region contract.Region
	// unconfirmed is the run and last change of the batch signalled last,
	// until it is known written; empty otherwise.
	unconfirmed struct {
		runID string
		last  int64
	}
	// took is how long central took to write the last batch confirmed,
	// from its signal to the answer that it was written; 0 before the
	// first.
	took time.Duration
}

// NewIngestSender returns the sender of one site's batches to region's
// central.
func NewIngestSender(tc client.Client, region contract.Region) *IngestSender {
	return &IngestSender{tc: tc, region: region}
}

// Send signals batch to its site's ingest workflow, starting it if it is
// not running, and returns once central wrote it. compress sends it as
// temporalcontract.EncodeTelemetryBatch does, for central workers of
// contract.GenerationCompressedTelemetry or later.
func (s *IngestSender) Send(ctx context.Context, batch contract.TelemetryBatch, compress bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id := s.region.TelemetryIngestWorkflowID(batch.SiteID)
	if s.unconfirmed.runID != "" {
		err := awaitWritten(ctx, s.tc, id, s.unconfirmed.runID, batch.SiteID, s.unconfirmed.last, newQuerySchedule(0))
		if err != nil && !errors.Is(err, errIngestEnded) {
			return err
		}
		s.unconfirmed.runID = "" // written, or to be sent again below
	}
	var signal any = batch
	if compress {
		encoded, err := temporalcontract.EncodeTelemetryBatch(batch)
		if err != nil {
			return err
		}
		signal = encoded
	}
	run, err := s.tc.SignalWithStartWorkflow(ctx, id, contract.SignalTelemetryBatch, signal, InRegion(client.StartWorkflowOptions{
		ID:            id,
		TaskQueue:     contract.CentralTaskQueue,
		StaticSummary: contract.Summary("Telemetry ingest: sites' tracking changes, written to the central store as they arrive"),
	}, s.region), contract.WorkflowTelemetryIngest)
	if err != nil {
		return fmt.Errorf("signal telemetry ingest %s: %w", id, err)
	}
	signalled := time.Now()
	s.unconfirmed.runID, s.unconfirmed.last = run.GetRunID(), batch.Rows[len(batch.Rows)-1].Seq
	if err := awaitWritten(ctx, s.tc, id, s.unconfirmed.runID, batch.SiteID, s.unconfirmed.last, newQuerySchedule(s.took)); err != nil {
		return err
	}
	s.unconfirmed.runID, s.took = "", time.Since(signalled)
	return nil
}

// querySchedule is how long awaitWritten waits before each question.
type querySchedule struct {
	next time.Duration
	step time.Duration
}

// Bounds of a querySchedule: the first step after a write that took
// nothing, the longest step, and the longest wait before the first
// question. The site sends its next batch only once this one is known
// written, so a first question asked late holds the next batch back: after
// a write slowed by an outage (a worker killed mid-write took seconds) the
// next batch waits at most maxFirstQueryWait longer than it must.
const (
	minQueryStep      = 20 * time.Millisecond
	maxQueryStep      = 500 * time.Millisecond
	maxFirstQueryWait = 2 * time.Second
)

// newQuerySchedule is the schedule for a batch after one that took took to
// be written (0: none known): the first question after three quarters of
// took (at most maxFirstQueryWait), then steps from an eighth of it, each
// twice the one before. With nothing
// known, it asks at once, then after 20 ms, 40 ms, ... up to maxQueryStep.
func newQuerySchedule(took time.Duration) *querySchedule {
	return &querySchedule{next: min(took*3/4, maxFirstQueryWait), step: min(max(took/8, minQueryStep), maxQueryStep)}
}

// wait is how long to wait before the next question.
func (q *querySchedule) wait() time.Duration {
	wait := q.next
	q.next, q.step = q.step, min(2*q.step, maxQueryStep)
	return wait
}

// errIngestEnded is awaitWritten's answer for a run that ended (terminated,
// cancelled, failed) without writing the batch: it must be sent again.
var errIngestEnded = errors.New("telemetry ingest ended before it wrote the batch")

// awaitWritten waits until run of ingest workflow id wrote site's changes
// up to last, asking on schedule: its answer to QueryTelemetryWritten
// reaches last, or it continued as new, which it does only once everything
// signalled to it is written. Until then the site keeps the batch and
// sends no other, so an ingest run holds at most one unwritten batch of
// each site.
func awaitWritten(ctx context.Context, tc client.Client, id, runID, site string, last int64, schedule *querySchedule) error {
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("telemetry ingest %s has not written changes up to %d: %w", id, last, ctx.Err())
		case <-time.After(schedule.wait()):
		}
		resp, err := askWritten(ctx, tc, id, runID, site)
		if errors.Is(err, errUnanswered) {
			continue
		}
		if err != nil {
			return fmt.Errorf("ask telemetry ingest %s whether it wrote changes up to %d: %w", id, last, err)
		}
		if rejected := resp.QueryRejected; rejected != nil {
			if rejected.GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
				return nil
			}
			return fmt.Errorf("%w: %s ended %s before changes up to %d", errIngestEnded, id, rejected.GetStatus(), last)
		}
		var written int64
		if err := resp.QueryResult.Get(&written); err != nil {
			return fmt.Errorf("read telemetry ingest %s's answer: %w", id, err)
		}
		if written >= last {
			return nil
		}
	}
}

// queryTimeout bounds one question to an ingest workflow. A query that
// reaches the worker while the workflow is busy can go unanswered (the
// worker answers after the server stopped waiting): the 200-site cluster
// bench saw a site wait out its whole send for a batch written 1 s after
// its signal. Asked again, an idle workflow answers at once. Not shorter:
// on a loaded machine a busy workflow's answer can take seconds, and a
// question given up too soon is asked again, and again given up.
const queryTimeout = 10 * time.Second

// errUnanswered is askWritten's answer for a question that went
// unanswered: ask again.
var errUnanswered = errors.New("telemetry ingest did not answer the question")

// askWritten asks run of ingest workflow id for the last change of site it
// wrote, giving up after queryTimeout. A question that timed out, was
// cancelled by the server (a cluster node resets a query stream it gave
// up on) or found the service busy or away is errUnanswered while ctx
// lasts.
func askWritten(ctx context.Context, tc client.Client, id, runID, site string) (*client.QueryWorkflowWithOptionsResponse, error) {
	question, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	resp, err := tc.QueryWorkflowWithOptions(question, &client.QueryWorkflowWithOptionsRequest{
		WorkflowID: id, RunID: runID, QueryType: contract.QueryTelemetryWritten, Args: []any{site},
		QueryRejectCondition: enums.QUERY_REJECT_CONDITION_NOT_OPEN,
	})
	if err != nil && ctx.Err() == nil && unanswered(err) {
		return nil, fmt.Errorf("%w: %w", errUnanswered, err)
	}
	return resp, err
}

// unanswered reports whether err says the question got no answer, rather
// than that the question was wrong or the workflow is gone.
func unanswered(err error) bool {
	switch serviceerror.ToStatus(err).Code() {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// ingestTelemetryByWorkflow runs one ingest workflow for the batch and
// waits until central persisted it: how a site sends while a central worker
// from before contract.GenerationTelemetryIngest polls. A resend of the
// same batch joins the run already under way.
func ingestTelemetryByWorkflow(ctx context.Context, tc client.Client, region contract.Region, batch contract.TelemetryBatch) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	last := batch.Rows[len(batch.Rows)-1].Seq
	run, err := tc.ExecuteWorkflow(ctx, InRegion(client.StartWorkflowOptions{
		ID:                       contract.TelemetryWorkflowID(batch.SiteID, last),
		TaskQueue:                contract.CentralTaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// No central worker for a minute: give up rather than pile up runs;
		// the rows are still in the outbox.
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            contract.Summary(fmt.Sprintf("Telemetry from %s: %d tracking changes", batch.SiteID, len(batch.Rows))),
	}, region), contract.WorkflowIngestTelemetry, batch)
	if err != nil {
		return fmt.Errorf("start telemetry ingest: %w", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("telemetry ingest %s: %w", run.GetID(), err)
	}
	return nil
}

// noteOutcome logs when sending starts failing and when it recovers, not on
// every retry of an outage.
func (t *Telemetry) noteOutcome(err error) {
	switch {
	case err != nil && !t.failing:
		t.failing = true
		t.log.Warn("telemetry failing; changes stay in the outbox", zap.Error(err))
	case err == nil && t.failing:
		t.failing = false
		t.log.Info("telemetry recovered")
	}
}
