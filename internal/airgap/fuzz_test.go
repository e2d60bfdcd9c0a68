package airgap

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/outpost-dev/outpost/internal/hlc"
)

// fuzzKey is fixed, so a corpus entry signed in one fuzz worker still
// verifies in another and the fuzzer can reach past the signature check.
var fuzzKey = newPrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))

// FuzzDecodeAndVerify feeds arbitrary bytes to everything that reads a
// file from removable media: none of it may panic, whatever the stick holds.
func FuzzDecodeAndVerify(f *testing.F) {
	// A small bundle: the fuzzer minimizes every input that finds new
	// coverage, which is slow on large ones.
	logs := []JobLog{
		newChain("n1").addN("a", 2).log,
		newChain("n2").startAt(hlc.PayloadHash([]byte("pruned")), hlc.Timestamp{Physical: t0.UnixMilli()}).addN("b", 1).log,
	}
	valid := encodeBytes(f, signedBundle(f, fuzzKey, logs))
	receipt := testReceipt()
	if err := receipt.Sign(fuzzKey); err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(encodeBytes(f, receipt))
	f.Add(bytes.Replace(valid, []byte("alarm a 1"), []byte("alarm a 2"), 1))
	f.Add(bytes.Replace(valid, []byte(`"prevLink": "`), []byte(`"prevLink": "!`), 1))
	f.Add(bytes.Replace(valid, []byte(`"signature": {`), []byte(`"signature": null, "x": {`), 1))
	f.Add([]byte(strings.Replace(string(valid), `"tHlc": "0`, `"tHlc": "+`, 1)))
	f.Add(bytes.Replace(valid, []byte("alarm"), []byte(`\u00e9\ud83d\ude00\/\t\\`), 1))
	f.Add(valid[:len(valid)/2])
	f.Add([]byte(`{"format":"outpost-airgap-bundle/v1","jobLogs":[{"entries":[{}]}],"signature":{"signatures":[{}]}}`))

	trusted := []PublicKey{fuzzKey.Public()}
	f.Fuzz(func(t *testing.T, data []byte) {
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
	})
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
