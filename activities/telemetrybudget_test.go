package activities

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/centraltest"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// encodedBatch is site's changes 1 to n, as a site signals them.
func encodedBatch(t *testing.T, site string, n int64) converter.RawValue {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Second)
	batch := contract.TelemetryBatch{SiteID: site}
	for seq := int64(1); seq <= n; seq++ {
		batch.Rows = append(batch.Rows, contract.TrackedOperation{
			OperationID: fmt.Sprintf("%s-op-%d", site, seq), Kind: contract.KindExternalCall, Target: "erp.createOrder",
			Status: contract.StatusDelivered, SourceSiteID: site, CreatedAt: at, UpdatedAt: at, TerminalAt: &at, Seq: seq,
		})
	}
	payload, err := converter.GetDefaultDataConverter().ToPayload(batch)
	require.NoError(t, err)
	return converter.NewRawValue(payload)
}

// compressedBatch is encodedBatch as a site signals it to workers of
// contract.GenerationCompressedTelemetry.
func compressedBatch(t *testing.T, site string, n int64) converter.RawValue {
	t.Helper()
	var batch contract.TelemetryBatch
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(encodedBatch(t, site, n).Payload(), &batch))
	compressed, err := temporalcontract.EncodeTelemetryBatch(batch)
	require.NoError(t, err)
	return compressed
}

// A write takes compressed batches and batches of sites before compression
// together, and holds the budget for their JSON, not for the bytes they
// came in: what the worker decodes is their JSON.
func TestTelemetryWriteDecodesCompressedBatches(t *testing.T) {
	t.Parallel()
	store, _ := centraltest.Open(t)
	plain, compressed := encodedBatch(t, "plant-1", 40), compressedBatch(t, "plant-2", 40)
	require.Less(t, len(compressed.Payload().GetData()), len(plain.Payload().GetData())/2)
	jsonBytes := jsonSize(plain) // both batches' JSON is as long: same lengths of ids
	acts := &MirrorActivities{Store: store, Telemetry: NewTelemetryBudget(2 * jsonBytes)}

	others, err := acts.Telemetry.hold(context.Background(), jsonBytes+1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = acts.MirrorTelemetry(ctx, []converter.RawValue{compressed})
	require.ErrorIs(t, err, context.DeadlineExceeded, "a compressed batch waits for the budget of its JSON")
	others()

	written, err := acts.MirrorTelemetry(context.Background(), []converter.RawValue{plain, compressed})
	require.NoError(t, err)
	require.Equal(t, []contract.TelemetryWritten{{SiteID: "plant-1", Seq: 40}, {SiteID: "plant-2", Seq: 40}}, written)
	row, err := store.GetSiteCall(context.Background(), "plant-2-op-40")
	require.NoError(t, err, "the compressed batch's rows are stored")
	require.Equal(t, contract.StatusDelivered, row.Status)
}

// A telemetry write decodes its batches only within the worker's budget:
// while other writes hold it, the write waits, decoding and storing
// nothing, and once they give it back the write goes on. However many
// ingest shards a worker runs, the rows they hold decoded at once stay
// within the budget.
func TestTelemetryWriteWaitsForTheWorkersBudget(t *testing.T) {
	t.Parallel()
	store, _ := centraltest.Open(t)
	batch := encodedBatch(t, "plant-1", 50)
	acts := &MirrorActivities{Store: store, Telemetry: NewTelemetryBudget(2 * jsonSize(batch))}

	others, err := acts.Telemetry.hold(context.Background(), jsonSize(batch)+1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = acts.MirrorTelemetry(ctx, []converter.RawValue{batch})
	require.ErrorIs(t, err, context.DeadlineExceeded, "the write must wait while the budget left is under its batches")
	_, err = store.GetSiteCall(context.Background(), "plant-1-op-1")
	require.ErrorIs(t, err, centralstore.ErrNotFound, "a write waiting for the budget stores nothing")

	others()
	written, err := acts.MirrorTelemetry(context.Background(), []converter.RawValue{batch})
	require.NoError(t, err)
	require.Equal(t, []contract.TelemetryWritten{{SiteID: "plant-1", Seq: 50}}, written)
	_, err = store.GetSiteCall(context.Background(), "plant-1-op-50")
	require.NoError(t, err, "with the budget free, the write stores the batch")
}

// A write of more than the whole budget waits for all of it, and is made.
func TestTelemetryWriteLargerThanTheBudgetIsMade(t *testing.T) {
	t.Parallel()
	store, _ := centraltest.Open(t)
	a, b := encodedBatch(t, "plant-1", 20), encodedBatch(t, "plant-2", 30)
	acts := &MirrorActivities{Store: store, Telemetry: NewTelemetryBudget(jsonSize(a))}

	written, err := acts.MirrorTelemetry(context.Background(), []converter.RawValue{a, b})
	require.NoError(t, err)
	require.Equal(t, []contract.TelemetryWritten{{SiteID: "plant-1", Seq: 20}, {SiteID: "plant-2", Seq: 30}}, written)
	others, err := acts.Telemetry.hold(context.Background(), jsonSize(a))
	require.NoError(t, err, "the write gave the whole budget back")
	others()
}

// A batch that does not decode is refused for good: retrying cannot help.
func TestTelemetryBatchThatDoesNotDecodeIsRefused(t *testing.T) {
	t.Parallel()
	store, _ := centraltest.Open(t)
	acts := NewMirrorActivities(store)
	payload, err := converter.GetDefaultDataConverter().ToPayload("not a batch")
	require.NoError(t, err)

	_, err = acts.MirrorTelemetryBatch(context.Background(), converter.NewRawValue(payload))
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.True(t, appErr.NonRetryable())
	require.Equal(t, ErrTypeBadTelemetry, appErr.Type())
}
