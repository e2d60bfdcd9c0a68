package airgap

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/outpost-dev/outpost/internal/hlc"
)

// fuzzKey is fixed, so a corpus entry signed in one fuzz worker still
// verifies in another and the fuzzer can reach past the signature check.
var fuzzKey = newPrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))

// FuzzDecodeAndVerify feeds arbitrary bytes to everything that reads a
// file from removable media: none of it may panic, whatever the stick holds.
// go test runs its seeds; TestAnyBytesAsABundle mutates them for a
// moment in every run; go test -fuzz searches further.
func FuzzDecodeAndVerify(f *testing.F) {
	for _, seed := range fuzzSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(readAnyBytes)
}

// TestAnyBytesAsABundle is a brief fuzzing run inside the suite: 3,000
// random mutations of the seeds (flipped, inserted, deleted and duplicated
// bytes, cut ends), the same every run, through readAnyBytes.
func TestAnyBytesAsABundle(t *testing.T) {
	seeds := fuzzSeeds(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		data := mutate(rng, slices.Clone(seeds[i%len(seeds)]))
		t.Run(strconv.Itoa(i), func(t *testing.T) { readAnyBytes(t, data) })
	}
}

// jsonBytes are the bytes an insertion picks from: JSON's structure.
const jsonBytes = `{}[]",:\u0 `

// mutate applies one to four random edits to data.
func mutate(rng *rand.Rand, data []byte) []byte {
	for range 1 + rng.IntN(4) {
		if len(data) == 0 {
			return []byte{byte(rng.IntN(256))}
		}
		i := rng.IntN(len(data))
		switch rng.IntN(5) {
		case 0:
			data[i] ^= byte(1 << rng.IntN(8))
		case 1:
			data = slices.Insert(data, i, jsonBytes[rng.IntN(len(jsonBytes))])
		case 2:
			data = slices.Delete(data, i, min(len(data), i+1+rng.IntN(8)))
		case 3:
			j := rng.IntN(len(data))
			data = slices.Insert(data, i, slices.Clone(data[min(i, j):max(i, j)])...)
		default:
			data = data[:i]
		}
	}
	return data
}

// fuzzSeeds are a small valid bundle and receipt and near misses of them.
// Small: the fuzzer minimizes every input that finds new coverage, which is
// slow on large ones.
func fuzzSeeds(tb testing.TB) [][]byte {
	logs := []JobLog{
		newChain("n1").addN("a", 2).log,
		newChain("n2").startAt(hlc.PayloadHash([]byte("pruned")), hlc.Timestamp{Physical: t0.UnixMilli()}).addN("b", 1).log,
	}
	valid := encodeBytes(tb, signedBundle(tb, fuzzKey, logs))
	receipt := testReceipt()
	if err := receipt.Sign(fuzzKey); err != nil {
		tb.Fatal(err)
	}
	return [][]byte{
		valid,
		encodeBytes(tb, receipt),
		bytes.Replace(valid, []byte("alarm a 1"), []byte("alarm a 2"), 1),
		bytes.Replace(valid, []byte(`"prevLink": "`), []byte(`"prevLink": "!`), 1),
		bytes.Replace(valid, []byte(`"signature": {`), []byte(`"signature": null, "x": {`), 1),
		[]byte(strings.Replace(string(valid), `"tHlc": "0`, `"tHlc": "+`, 1)),
		bytes.Replace(valid, []byte("alarm"), []byte(`\u00e9\ud83d\ude00\/\t\\`), 1),
		valid[:len(valid)/2],
		[]byte(`{"format":"outpost-airgap-bundle/v1","jobLogs":[{"entries":[{}]}],"signature":{"signatures":[{}]}}`),
	}
}

// readAnyBytes reads data as a bundle and as a receipt, and verifies and
// merges whatever decodes, checking the bundle decoder and encoder against
// encoding/json on the way.
func readAnyBytes(t *testing.T, data []byte) {
	trusted := []PublicKey{fuzzKey.Public()}
	requireSameReadingAhead(t, string(data))
	if b, err := DecodeBundle(bytes.NewReader(data)); err == nil {
		requireSameAsEncodingJSON(t, data, b)
		requireEncodesAsEncodingJSON(t, b)
		Verify(b, VerifyOptions{TrustedKeys: trusted})
		Verify(b, VerifyOptions{AllowUnsigned: true}).BadNodes()
		Merge([]Bundle{b, b})
	}
	if r, err := DecodeReceipt(bytes.NewReader(data)); err == nil {
		VerifyReceipt(r, VerifyOptions{TrustedKeys: trusted})
	}
}

// requireSameReadingAhead fails unless the bundle decoder, taking entries
// read ahead in pieces of a few bytes (so that even a small file has many,
// and they start in every kind of place), returns exactly what it returns
// reading in order: the same bundle, or the same error. It tries each
// piece size twice: with every run read ahead, and with every other run
// dropped, as when a piece's guess went nowhere, so that the decoder reads
// entries between runs itself.
func requireSameReadingAhead(t *testing.T, data string) {
	t.Helper()
	want, wantErr := decodeBundleWith(data, nil)
	for _, piece := range []int{7, 64, 301} {
		runs := readAhead(data, piece)
		everyOther := slices.Clone(runs)
		for i := range everyOther {
			if i%2 == 0 {
				everyOther[i].entries = nil
			}
		}
		everyOther = slices.DeleteFunc(everyOther, func(r aheadRun) bool { return r.entries == nil })
		for name, ahead := range map[string][]aheadRun{"every run": runs, "every other run": everyOther} {
			got, err := decodeBundleWith(data, ahead)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("reading ahead in pieces of %d bytes (%s) gave\n%+v, %v\nreading in order gave\n%+v, %v\nfrom %q",
					piece, name, got, err, want, wantErr, data)
			}
		}
	}
}

// requireSameAsEncodingJSON fails unless encoding/json, strictly, decodes
// data to b too: the hand-written bundle decoder may refuse more than
// encoding/json, never accept more or read anything differently.
func requireSameAsEncodingJSON(t *testing.T, data []byte, b Bundle) {
	t.Helper()
	var want Bundle
	if err := decodeStrict(data, &want); err != nil {
		t.Fatalf("the bundle decoder accepted what encoding/json refuses (%v):\n%q", err, data)
	}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("the bundle decoder read\n%+v\nencoding/json read\n%+v\nfrom %q", b, want, data)
	}
}

// encodingJSON is what Encode wrote before the bundle encoder: the file
// format the bundle encoder must keep byte for byte.
func encodingJSON(t *testing.T, b Bundle) []byte {
	t.Helper()
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// requireEncodesAsEncodingJSON fails unless the bundle encoder writes b
// exactly as encoding/json does.
func requireEncodesAsEncodingJSON(t *testing.T, b Bundle) {
	t.Helper()
	var got bytes.Buffer
	if err := encodeBundle(&got, &b); err != nil {
		t.Fatal(err)
	}
	if want := encodingJSON(t, b); !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("the bundle encoder wrote\n%s\nencoding/json writes\n%s", got.Bytes(), want)
	}
}

// TestDecodeBundleReadsAheadOnABigFile decodes a bundle of several pieces
// as an import does, with the pieces' runs read on every core, and
// requires what reading in order returns.
func TestDecodeBundleReadsAheadOnABigFile(t *testing.T) {
	file := encodeBytes(t, signedBundle(t, fuzzKey, syntheticLogs(6000, t0)))
	if runs := readAhead(string(file), pieceBytes); len(file) < 3*pieceBytes || len(runs) < 2 {
		t.Fatalf("a %d-byte file read ahead in %d runs: too small to test reading ahead", len(file), len(runs))
	}
	got, err := DecodeBundle(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeBundleWith(string(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("reading ahead decoded the bundle differently from reading in order")
	}
	if err := Verify(got, VerifyOptions{TrustedKeys: []PublicKey{fuzzKey.Public()}}).Err(); err != nil {
		t.Fatal(err)
	}
}
