package temporalcontract_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/temporalcontract"
)

func telemetryBatch(n int) contract.TelemetryBatch {
	at := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	batch := contract.TelemetryBatch{SiteID: "plant-1"}
	for seq := 1; seq <= n; seq++ {
		batch.Rows = append(batch.Rows, contract.TrackedOperation{
			OperationID: fmt.Sprintf("op-%d", seq), Kind: contract.KindExternalCall, Target: "erp.createOrder",
			Status: contract.StatusRetrying, SourceSiteID: "plant-1", CreatedAt: at, UpdatedAt: at,
			LastError: "connect: connection refused", RetryCount: seq, Seq: int64(seq),
		})
	}
	return batch
}

// A compressed batch decodes to the batch the site read, says its JSON's
// size (what a worker's bounds count) and is a fraction of it.
func TestCompressedTelemetryBatchRoundTrips(t *testing.T) {
	batch := telemetryBatch(500)
	plain, err := json.Marshal(batch)
	require.NoError(t, err)

	encoded, err := temporalcontract.EncodeTelemetryBatch(batch)
	require.NoError(t, err)
	payload := encoded.Payload()
	require.Equal(t, temporalcontract.EncodingGzipJSON, string(payload.GetMetadata()[converter.MetadataEncoding]))
	require.Less(t, len(payload.GetData()), len(plain)/5, "tracking changes compress")
	require.Equal(t, len(plain), temporalcontract.TelemetryBatchSize(payload), "the size counted is the JSON's")

	got, err := temporalcontract.DecodeTelemetryBatch(payload)
	require.NoError(t, err)
	require.Equal(t, batch, got)
}

// A batch as sites before compression send it (the SDK's JSON) decodes
// as before, and its size is its payload's.
func TestPlainTelemetryBatchDecodes(t *testing.T) {
	batch := telemetryBatch(3)
	payload, err := converter.GetDefaultDataConverter().ToPayload(batch)
	require.NoError(t, err)
	require.Equal(t, len(payload.GetData()), temporalcontract.TelemetryBatchSize(payload))
	got, err := temporalcontract.DecodeTelemetryBatch(payload)
	require.NoError(t, err)
	require.Equal(t, batch, got)
}

// A payload that decompresses to more than a site ever sends is refused
// before it is held in a worker's memory, and one whose size metadata is
// missing or understates it is counted at its real bound: the sender is
// not trusted to say how much memory its batch takes.
func TestCompressedTelemetryBatchIsBounded(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(`{"siteId":"plant-1","rows":[],"pad":"` + strings.Repeat("a", temporalcontract.MaxTelemetryBatchBytes) + `"}`))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	bomb := &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(temporalcontract.EncodingGzipJSON)},
		Data:     buf.Bytes(),
	}
	_, err = temporalcontract.DecodeTelemetryBatch(bomb)
	require.ErrorContains(t, err, "decompresses to more than")
	require.Equal(t, temporalcontract.MaxTelemetryBatchBytes, temporalcontract.TelemetryBatchSize(bomb), "no size said: counted at the bound")

	bomb.Metadata["outpost-json-bytes"] = []byte("10")
	require.Equal(t, len(bomb.GetData()), temporalcontract.TelemetryBatchSize(bomb), "never less than the payload itself")
	bomb.Metadata["outpost-json-bytes"] = []byte("1000000000")
	require.Equal(t, temporalcontract.MaxTelemetryBatchBytes, temporalcontract.TelemetryBatchSize(bomb), "never more than the bound")

	bomb.Data = []byte("not gzip")
	_, err = temporalcontract.DecodeTelemetryBatch(bomb)
	require.ErrorContains(t, err, "decompress telemetry batch")
}
