package airgap

import (
	"bytes"
	"crypto/sha256"
	"testing"
	"time"
)

// benchBundle is a signed 100,000-entry bundle as its file holds it, its
// verify options, and its payloads.
func benchBundle(b *testing.B) (file []byte, opts VerifyOptions, payloads [][]byte) {
	b.Helper()
	logs := syntheticLogs(100_000, t0)
	bundle := signedBundle(b, fuzzKey, logs)
	return encodeBytes(b, bundle), VerifyOptions{TrustedKeys: []PublicKey{fuzzKey.Public()}}, payloadBytes(logs)
}

// BenchmarkVerify100k reads and verifies a 100,000-entry bundle file, as an
// import does; compare with BenchmarkSHA256Same100k.
func BenchmarkVerify100k(b *testing.B) {
	file, opts, _ := benchBundle(b)
	b.SetBytes(int64(len(file)))
	for b.Loop() {
		bundle, err := DecodeBundle(bytes.NewReader(file))
		if err != nil {
			b.Fatal(err)
		}
		if err := Verify(bundle, opts).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyDecoded100k is Verify alone, without reading the file.
func BenchmarkVerifyDecoded100k(b *testing.B) {
	file, opts, _ := benchBundle(b)
	bundle, err := DecodeBundle(bytes.NewReader(file))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := Verify(bundle, opts).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSHA256Same100k is SHA-256 alone over the same payloads.
func BenchmarkSHA256Same100k(b *testing.B) {
	_, _, payloads := benchBundle(b)
	for b.Loop() {
		for _, p := range payloads {
			sha256.Sum256(p)
		}
	}
}

func TestMeasure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and times bundles")
	}
	for name, measure := range map[string]func(int) (time.Duration, time.Duration, error){
		"verify": MeasureVerify, "export": MeasureExport,
	} {
		took, hashOnly, err := measure(1000)
		if err != nil || took <= 0 || hashOnly <= 0 {
			t.Errorf("Measure %s = %v, %v, %v", name, took, hashOnly, err)
		}
	}
}
