package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/semaphore"

	"github.com/outpost-dev/outpost/temporalcontract"
)

// TelemetryBudgetBytes is a central worker's telemetry budget: batches
// whose JSON is about 4,800 of a fleet's tracking changes, decoded and
// written at once across every ingest shard the process runs
// (temporalcontract.TelemetryBatchSize counts a compressed batch by its
// JSON). When a fleet's sites all send at once, every shard has batches
// waiting; without the budget each shard decoded its own together, and
// each of two workers held most of the fleet's changes, their audit
// events and SQL arguments at once (outpost bench --only fleet: 177-231
// MiB VmHWM a worker). The writes it admits together share a
// transaction when they wait for the store's turn together: with 1 MiB
// they carried too little and the ingest of 200 sites' batches, 8 in
// flight, fell to 0.64x of the bulk upserts (outpost bench --only
// telemetry). With 4 MiB and batches signalled as JSON the fleet's
// workers peaked at 118-129 MiB; with the batches compressed, 104-114
// MiB at 4 MiB and 94-99 MiB at 2 MiB, the telemetry section's ingest
// at 0.93x both times (0.91x and 0.98x at 4 MiB).
const TelemetryBudgetBytes = 2 << 20

// TelemetryBudget bounds the bytes of telemetry batches' JSON a process
// decodes and writes at once; a write waits for its share.
type TelemetryBudget struct {
	sem  *semaphore.Weighted
	size int64
}

// NewTelemetryBudget is a budget of size bytes.
func NewTelemetryBudget(size int64) *TelemetryBudget {
	return &TelemetryBudget{sem: semaphore.NewWeighted(size), size: size}
}

// hold waits until n bytes of the budget are free and takes them; a write
// larger than the whole budget takes all of it. release gives them back.
func (b *TelemetryBudget) hold(ctx context.Context, n int64) (release func(), err error) {
	n = min(n, b.size)
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, fmt.Errorf("wait for the worker's telemetry budget (%d of %d bytes): %w", n, b.size, err)
	}
	return func() { b.sem.Release(n) }, nil
}

// jsonSize is the bytes of batches' JSON, however they came
// (temporalcontract.TelemetryBatchSize).
func jsonSize(batches ...converter.RawValue) int64 {
	var n int64
	for _, b := range batches {
		n += int64(temporalcontract.TelemetryBatchSize(b.Payload()))
	}
	return n
}
