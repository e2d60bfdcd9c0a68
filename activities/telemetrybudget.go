package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/converter"
	"golang.org/x/sync/semaphore"
)

// TelemetryBudgetBytes is a central worker's telemetry budget: encoded
// batches of about 9,500 of a fleet's tracking changes, decoded and
// written at once across every ingest shard the process runs, about as
// many as the store merges into one transaction (centralstore's
// maxMergedRows). When a fleet's sites all send at once, every shard has
// batches waiting; without the budget each shard decoded its own
// together, and each of two workers held most of the fleet's changes,
// their audit events and SQL arguments at once (outpost bench --only
// fleet: 177-231 MiB VmHWM a worker, 114-129 MiB with this budget). The
// writes it admits together share a transaction when they wait for the
// store's turn together: with 1 MiB they carried too little, and the
// ingest of 200 sites' batches, 8 in flight, fell to 0.64-0.65x of the
// bulk upserts, where this budget gave 0.82x twice and the code before it
// 0.78x and 0.88x (outpost bench --only telemetry). With 1 or 2 MiB the
// fleet's workers peaked at 103-121 MiB.
const TelemetryBudgetBytes = 4 << 20

// TelemetryBudget bounds the bytes of encoded telemetry batches a process
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

// encodedSize is the bytes of batches' payloads.
func encodedSize(batches ...converter.RawValue) int64 {
	var n int64
	for _, b := range batches {
		n += int64(len(b.Payload().GetData()))
	}
	return n
}
