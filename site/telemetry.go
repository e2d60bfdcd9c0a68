package site

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/workflows"
)

// TelemetryOptions tunes the telemetry sender (site config).
type TelemetryOptions struct {
	SiteID string
	// Batch is the most changes per batch; a full batch goes at once.
	Batch int
	// Delay is the longest a change waits for its batch to fill.
	Delay time.Duration
}

// Telemetry sends tracking-row changes to central's site_calls in batches.
// Its outbox is the tracking table itself: every change takes the next
// change number, and the sender's cursor moves past a batch only after
// central has persisted it. Nothing is lost while central is away; a row
// changed twice before a send travels once, in its latest state.
type Telemetry struct {
	store    *sitestore.Store
	temporal client.Client
	opts     TelemetryOptions
	log      *zap.Logger
	// batches counts batches central persisted: its round trips.
	batches atomic.Int64
	failing bool
}

// NewTelemetry returns a sender over store.
func NewTelemetry(store *sitestore.Store, tc client.Client, opts TelemetryOptions, log *zap.Logger) *Telemetry {
	return &Telemetry{store: store, temporal: tc, opts: opts, log: log}
}

// Batches is how many batches central has persisted since start.
func (t *Telemetry) Batches() int64 { return t.batches.Load() }

// Run sends until ctx ends: every Delay, or at once when a full batch is waiting.
func (t *Telemetry) Run(ctx context.Context) error {
	tick := time.NewTicker(t.opts.Delay)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.store.TrackingChanged():
			if n, err := t.store.TelemetryBacklog(ctx, t.opts.Batch); err != nil || n < t.opts.Batch {
				continue // not full: the tick sends it
			}
		case <-tick.C:
		}
		t.Flush(ctx)
	}
}

// Flush sends every waiting change, a batch at a time, and stops at the
// first failure (the next tick tries again).
func (t *Telemetry) Flush(ctx context.Context) {
	for ctx.Err() == nil {
		sent, err := t.sendBatch(ctx)
		t.noteOutcome(err)
		if err != nil || sent < t.opts.Batch {
			return
		}
	}
}

func (t *Telemetry) sendBatch(ctx context.Context) (int, error) {
	cursor, err := t.store.TelemetryCursor(ctx)
	if err != nil {
		return 0, err
	}
	rows, err := t.store.ChangesSince(ctx, cursor, t.opts.Batch)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	last := rows[len(rows)-1].Seq
	if err := t.ingest(ctx, workflows.TelemetryBatch{SiteID: t.opts.SiteID, Rows: rows}, last); err != nil {
		return 0, err
	}
	t.batches.Add(1)
	return len(rows), t.store.AdvanceTelemetryCursor(ctx, last)
}

// ingest runs the batch's ingest workflow and waits until central persisted
// it. A resend of the same batch joins the run already under way.
func (t *Telemetry) ingest(ctx context.Context, batch workflows.TelemetryBatch, last int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run, err := t.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.TelemetryWorkflowID(t.opts.SiteID, last),
		TaskQueue:                workflows.CentralTaskQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		// No central worker for a minute: give up rather than pile up runs;
		// the rows are still in the outbox.
		WorkflowExecutionTimeout: time.Minute,
		StaticSummary:            fmt.Sprintf("Telemetry from %s: %d tracking changes", t.opts.SiteID, len(batch.Rows)),
	}, workflows.IngestTelemetryWorkflow, batch)
	if err != nil {
		return fmt.Errorf("start telemetry ingest: %w", err)
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("telemetry ingest %s: %w", run.GetID(), err)
	}
	return nil
}

// noteOutcome logs when sending starts failing and when it recovers, not on
// every tick of an outage.
func (t *Telemetry) noteOutcome(err error) {
	switch {
	case err != nil && !t.failing:
		t.failing = true
		t.log.Warn("telemetry to central failing; changes stay in the outbox", zap.Error(err))
	case err == nil && t.failing:
		t.failing = false
		t.log.Info("telemetry to central recovered")
	}
}
