package temporalcontract

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/outpost-dev/outpost/contract"
)

// EncodingGzipJSON marks a telemetry batch's payload as its JSON,
// gzip-compressed. A central worker holds the batches sites signalled
// until it writes them, one per site at most: a fleet sending at once is
// that many batches in the worker's memory, and tracking changes, alike
// in most of their fields, compress to a fraction of their JSON.
const EncodingGzipJSON = "json/gzip"

// EncodeTelemetryBatch is batch as a site signals it to a central worker
// of contract.GenerationCompressedTelemetry or later: its JSON, compressed.
func EncodeTelemetryBatch(batch contract.TelemetryBatch) (converter.RawValue, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return converter.RawValue{}, fmt.Errorf("compress telemetry batch: %w", err)
	}
	encoded, err := json.Marshal(batch)
	if err != nil {
		return converter.RawValue{}, fmt.Errorf("encode telemetry batch of site %s: %w", batch.SiteID, err)
	}
	jsonBytes := len(encoded)
	if _, err := zw.Write(encoded); err != nil {
		return converter.RawValue{}, fmt.Errorf("compress telemetry batch of site %s: %w", batch.SiteID, err)
	}
	if err := zw.Close(); err != nil {
		return converter.RawValue{}, fmt.Errorf("compress telemetry batch of site %s: %w", batch.SiteID, err)
	}
	return converter.NewRawValue(&commonpb.Payload{
		Metadata: map[string][]byte{
			converter.MetadataEncoding: []byte(EncodingGzipJSON),
			metadataJSONBytes:          []byte(strconv.Itoa(jsonBytes)),
		},
		Data: buf.Bytes(),
	}), nil
}

// metadataJSONBytes is the metadata of a compressed batch that says how
// many bytes its JSON is.
const metadataJSONBytes = "outpost-json-bytes"

// TelemetryBatchSize is the bytes a telemetry batch's payload holds once
// decoded: its JSON's length, as the site said it (at least the payload's
// own length), or the payload's length for a batch not compressed. What a
// worker holds while it writes batches is their JSON and their decoded
// rows, so its bounds (how many batches one write takes, how many a
// process decodes at once) count this. A workflow may call it: it reads
// only the payload, which its history keeps.
func TelemetryBatchSize(payload *commonpb.Payload) int {
	size := len(payload.GetData())
	if string(payload.GetMetadata()[converter.MetadataEncoding]) != EncodingGzipJSON {
		return size
	}
	said, err := strconv.Atoi(string(payload.GetMetadata()[metadataJSONBytes]))
	if err != nil {
		return MaxTelemetryBatchBytes
	}
	return min(max(said, size), MaxTelemetryBatchBytes)
}

// DecodeTelemetryBatch decodes a telemetry batch's payload: compressed
// (EncodeTelemetryBatch) or as the SDK's default converter encodes a
// contract.TelemetryBatch (sites before compression, or sending to
// workers before it).
func DecodeTelemetryBatch(payload *commonpb.Payload) (contract.TelemetryBatch, error) {
	var batch contract.TelemetryBatch
	if string(payload.GetMetadata()[converter.MetadataEncoding]) != EncodingGzipJSON {
		err := converter.GetDefaultDataConverter().FromPayload(payload, &batch)
		return batch, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(payload.GetData()))
	if err != nil {
		return batch, fmt.Errorf("decompress telemetry batch: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, MaxTelemetryBatchBytes+1))
	if err != nil {
		return batch, fmt.Errorf("decompress telemetry batch: %w", err)
	}
	if len(data) > MaxTelemetryBatchBytes {
		return batch, fmt.Errorf("telemetry batch decompresses to more than %d bytes: a site sends at most %d", MaxTelemetryBatchBytes, contract.TelemetryMaxBytes)
	}
	if err := json.Unmarshal(data, &batch); err != nil {
		return batch, fmt.Errorf("decode compressed telemetry batch: %w", err)
	}
	return batch, nil
}

// MaxTelemetryBatchBytes bounds a compressed batch's JSON, four times what
// a site puts in one (contract.TelemetryMaxBytes): a payload that
// decompresses to more is refused, not decompressed into a worker's
// memory.
const MaxTelemetryBatchBytes = 4 * contract.TelemetryMaxBytes
