package fromconfig

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/encoding"
	grpcgzip "google.golang.org/grpc/encoding/gzip"
)

// The gzip compressor every Temporal request goes through writes what
// gzip's fastest level writes, not what its default level would.
func TestTemporalRequestsAreCompressedAtTheFastestLevel(t *testing.T) {
	t.Parallel()
	message := []byte(strings.Repeat(`{"to":["ops@example.org"],"subject":"Pump 7 pressure above threshold","site":"site-0042"} `, 40))
	var sent bytes.Buffer
	w, err := encoding.GetCompressor(grpcgzip.Name).Compress(&sent)
	require.NoError(t, err)
	_, err = w.Write(message)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	fastest, standard := gzipAt(t, gzip.BestSpeed, message), gzipAt(t, gzip.DefaultCompression, message)
	require.NotEqual(t, standard, fastest, "the sample must tell the levels apart")
	require.Equal(t, fastest, sent.Bytes(), "gRPC's gzip compressor is not at gzip.BestSpeed")
}

func gzipAt(t *testing.T, level int, message []byte) []byte {
	var out bytes.Buffer
	w, err := gzip.NewWriterLevel(&out, level)
	require.NoError(t, err)
	_, err = io.Copy(w, bytes.NewReader(message))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return out.Bytes()
}
