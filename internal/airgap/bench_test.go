package airgap

import (
	"bytes"
	"crypto/sha256"
	"testing"
)

// benchBundle is a signed 100,000-entry bundle as its file holds it, and
// its verify options.
func benchBundle(b *testing.B) (file []byte, opts VerifyOptions) {
	b.Helper()
	bundle := signedBundle(b, fuzzKey, syntheticLogs(100_000, t0))
	return encodeBytes(b, bundle), VerifyOptions{TrustedKeys: []PublicKey{fuzzKey.Public()}}
}

// BenchmarkVerify100k reads and verifies a 100,000-entry bundle file, as an
// import does; compare with BenchmarkSHA256File100k.
func BenchmarkVerify100k(b *testing.B) {
	file, opts := benchBundle(b)
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
	file, opts := benchBundle(b)
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

// BenchmarkSHA256File100k is SHA-256 alone over the same file.
func BenchmarkSHA256File100k(b *testing.B) {
	file, _ := benchBundle(b)
	b.SetBytes(int64(len(file)))
	for b.Loop() {
		sha256.Sum256(file)
	}
}

func TestMeasure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and times bundles")
	}
	for name, measure := range map[string]func(int) (Measurement, error){
		"verify": MeasureVerify, "export": MeasureExport,
	} {
		m, err := measure(1000)
		if err != nil || m.Took <= 0 || m.HashOnly <= 0 || m.FileBytes < 1000*200 {
			t.Errorf("Measure %s(1000) = %+v, %v", name, m, err)
		}
	}
}

// BenchmarkDecode100k is DecodeBundle alone.
func BenchmarkDecode100k(b *testing.B) {
	file, _ := benchBundle(b)
	b.SetBytes(int64(len(file)))
	for b.Loop() {
		if _, err := DecodeBundle(bytes.NewReader(file)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExport100k builds, signs and encodes a 100,000-entry bundle, as
// an export does; compare with BenchmarkSHA256File100k.
func BenchmarkExport100k(b *testing.B) {
	logs := syntheticLogs(100_000, t0)
	file, _ := benchBundle(b)
	b.SetBytes(int64(len(file)))
	var out bytes.Buffer
	out.Grow(len(file) + 4096)
	for b.Loop() {
		out.Reset()
		bundle := NewBundle("bench-site", "bench-node-1", t0, logs)
		if err := bundle.Sign(fuzzKey); err != nil {
			b.Fatal(err)
		}
		if err := Encode(&out, bundle); err != nil {
			b.Fatal(err)
		}
	}
}
