package airgap

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/hlc"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// chain builds a node's job log as a site node does, independently of the
// package's own code, with hlc.Link and hlc.PayloadHash.
type chain struct {
	log  JobLog
	prev []byte
	ts   hlc.Timestamp
}

func newChain(node string) *chain {
	return &chain{log: JobLog{NodeID: node}, ts: hlc.Timestamp{Physical: t0.UnixMilli()}}
}

// startAt makes the chain continue after an entry that is not exported.
func (c *chain) startAt(link []byte, ts hlc.Timestamp) *chain {
	c.prev, c.ts = link, ts
	c.log.Checkpoint = &Checkpoint{Link: b64(link), HLC: ts.String()}
	c.log.ChainHead, c.log.LastHLC = c.log.Checkpoint.Link, c.log.Checkpoint.HLC
	return c
}

func (c *chain) add(jobID, payload string) *chain {
	c.ts = hlc.Next(c.ts, c.ts.Physical)
	sum := hlc.PayloadHash([]byte(payload))
	link := hlc.Link(c.prev, jobID, c.ts, sum)
	var prev *string
	if c.prev != nil {
		p := b64(c.prev)
		prev = &p
	}
	c.log.Entries = append(c.log.Entries, Entry{
		NodeID: c.log.NodeID, THLC: c.ts.String(), JobID: jobID, Kind: contract.KindNotification,
		Payload: payload, PayloadHash: b64(sum), PrevLink: prev, Link: b64(link), EnqueuedAt: t0,
	})
	c.prev = link
	c.log.ChainHead, c.log.LastHLC = b64(link), c.ts.String()
	return c
}

func (c *chain) addN(prefix string, n int) *chain {
	for i := range n {
		c.add(fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf(`{"to":["ops@example.org"],"subject":"alarm %s %d"}`, prefix, i))
	}
	return c
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// testKey generates a key pair on disk, as an operator would, and loads it.
func testKey(t testing.TB, name string) (PrivateKey, PublicKey) {
	t.Helper()
	dir := t.TempDir()
	privPath, pubPath, err := GenerateKey(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := LoadPrivateKey(privPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// testLogs are two nodes' logs: n1 from its first entry, n2 from a
// checkpoint.
func testLogs() []JobLog {
	n1 := newChain("n1").addN("a", 5)
	n2 := newChain("n2").startAt(hlc.PayloadHash([]byte("pruned")), hlc.Timestamp{Physical: t0.UnixMilli(), Logical: 7}).addN("b", 3)
	return []JobLog{n1.log, n2.log}
}

func signedBundle(t testing.TB, key PrivateKey, logs []JobLog) Bundle {
	t.Helper()
	b := NewBundle("site-1", "n1", t0, logs)
	if err := b.Sign(key); err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeBytes(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Encode(&buf, v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeFile(t testing.TB, path string, v any) {
	t.Helper()
	if err := os.WriteFile(path, encodeBytes(t, v), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBundleRoundTrip(t *testing.T) {
	key, pub := testKey(t, "site")
	path := filepath.Join(t.TempDir(), "bundle.json")
	writeFile(t, path, signedBundle(t, key, testLogs()))

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := DecodeBundle(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(b, VerifyOptions{TrustedKeys: []PublicKey{pub}}).Err(); err != nil {
		t.Fatal(err)
	}
	if b.SignedBy != pub.ID() || !strings.HasPrefix(b.SignedBy, "ed25519:") || len(b.SignedBy) != len("ed25519:")+16 {
		t.Errorf("signedBy = %q, want key id %q", b.SignedBy, pub.ID())
	}
	if got := len(b.JobLogs[0].Entries) + len(b.JobLogs[1].Entries); got != 8 {
		t.Errorf("decoded %d entries, want 8", got)
	}
}

func TestVerifyRefusesTampering(t *testing.T) {
	key, pub := testKey(t, "site")
	_, otherPub := testKey(t, "other")
	file := encodeBytes(t, signedBundle(t, key, testLogs()))
	trusted := VerifyOptions{TrustedKeys: []PublicKey{pub}}
	n1 := map[string]bool{"n1": true}
	none := map[string]bool{}

	tests := []struct {
		name    string
		tamper  func(b *Bundle)
		opts    VerifyOptions
		want    string
		badNode map[string]bool
	}{
		{"one changed byte in a payload", func(b *Bundle) {
			e := &b.JobLogs[0].Entries[2]
			e.Payload = strings.Replace(e.Payload, "alarm", "alarn", 1)
		}, trusted, `node "n1" entry 2 (job a-2): payload hash does not match: stored `, n1},
		{"a reordered entry", func(b *Bundle) {
			e := b.JobLogs[0].Entries
			e[1], e[2] = e[2], e[1]
		}, trusted, `node "n1" entry 2 (job a-1): tHlc ` + hlc.Timestamp{Physical: t0.UnixMilli(), Logical: 2}.String() +
			` is not after the previous entry's ` + hlc.Timestamp{Physical: t0.UnixMilli(), Logical: 3}.String(), n1},
		{"a removed entry", func(b *Bundle) {
			b.JobLogs[0].Entries = slices.Delete(b.JobLogs[0].Entries, 2, 3)
		}, trusted, `node "n1" entry 2 (job a-3): prevLink does not match the previous entry's link`, n1},
		// A changed prevLink or payloadHash breaks the link too: the link
		// is computed from the fields as stored, not from what they
		// should have been.
		{"a prevLink naming another entry", func(b *Bundle) {
			e := b.JobLogs[0].Entries
			e[2].PrevLink = &e[0].Link
		}, trusted, `node "n1" entry 2 (job a-2): link does not match: stored `, n1},
		{"a payload hash of another payload", func(b *Bundle) {
			e := b.JobLogs[0].Entries
			e[1].PayloadHash = e[0].PayloadHash
		}, trusted, `node "n1" entry 1 (job a-1): link does not match: stored `, n1},
		{"a changed job id", func(b *Bundle) {
			b.JobLogs[1].Entries[0].JobID = "b-x"
		}, trusted, `node "n2" entry 0 (job b-x): link does not match: stored `, map[string]bool{"n2": true}},
		{"a wrong first prevLink", func(b *Bundle) {
			b.JobLogs[1].Entries[0].PrevLink = nil
		}, trusted, `node "n2" entry 0 (job b-0): prevLink does not match the checkpoint's link: stored null`, map[string]bool{"n2": true}},
		{"a wrong chain head", func(b *Bundle) {
			b.JobLogs[0].ChainHead = b.JobLogs[0].Entries[3].Link
		}, trusted, `node "n1": chainHead does not match the last link`, n1},
		{"a wrong last hlc", func(b *Bundle) {
			b.JobLogs[0].LastHLC = b.JobLogs[0].Entries[3].THLC
		}, trusted, `node "n1": lastHlc does not match the last entry's tHlc`, n1},
		{"an unknown kind", func(b *Bundle) {
			b.JobLogs[0].Entries[0].Kind = "Telegram"
		}, trusted, `node "n1" entry 0 (job a-0): unknown kind "Telegram"`, n1},
		{"a wrong manifest digest", func(b *Bundle) {
			b.ManifestDigest = "sha256:" + strings.Repeat("0", 64)
		}, trusted, "manifest digest does not match: stored sha256:000", none},
		{"a bad signature", func(b *Bundle) {
			sig := []byte(b.Signature.Signatures[0].Sig)
			sig[5] ^= 1
			b.Signature.Signatures[0].Sig = string(sig)
		}, trusted, "signature does not verify with key " + pub.ID(), none},
		{"a bundle id changed after signing", func(b *Bundle) {
			b.BundleID = "00000000-0000-0000-0000-000000000000"
		}, trusted, `bundle bundleId does not match its signature: file "00000000-0000-0000-0000-000000000000", signed `, none},
		{"an untrusted key", func(*Bundle) {}, VerifyOptions{TrustedKeys: []PublicKey{otherPub}},
			"signed by untrusted key " + pub.ID(), none},
		{"unsigned without allow", func(b *Bundle) { b.Signature, b.SignedBy = nil, "" }, trusted,
			"bundle is not signed (use --allow-unsigned to accept it)", none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := DecodeBundle(bytes.NewReader(file)) // a fresh deep copy
			if err != nil {
				t.Fatal(err)
			}
			tt.tamper(&b)
			report := Verify(b, tt.opts)
			if report.OK() || report.Err() == nil {
				t.Fatal("tampered bundle verified")
			}
			if !strings.Contains(report.Err().Error(), tt.want) {
				t.Errorf("report:\n%v\nwant a line containing %q", report.Err(), tt.want)
			}
			if got := report.BadNodes(); !maps.Equal(got, tt.badNode) {
				t.Errorf("BadNodes = %v, want %v", got, tt.badNode)
			}
		})
	}
}

func TestVerifyAllowsUnsignedOnlyWhenAsked(t *testing.T) {
	b := NewBundle("site-1", "n1", t0, testLogs())
	if err := Verify(b, VerifyOptions{AllowUnsigned: true}).Err(); err != nil {
		t.Fatalf("unsigned bundle with AllowUnsigned: %v", err)
	}
}

func TestVerifyRefusesDuplicateNode(t *testing.T) {
	logs := testLogs()
	logs = append(logs, logs[1])
	report := Verify(NewBundle("site-1", "n1", t0, logs), VerifyOptions{AllowUnsigned: true})
	want := `node "n2": node has more than one log in the bundle`
	if !strings.Contains(fmt.Sprint(report.Err()), want) {
		t.Errorf("report: %v\nwant %q", report.Err(), want)
	}
}

func TestDecodeBundleIsStrict(t *testing.T) {
	key, _ := testKey(t, "site")
	file := encodeBytes(t, signedBundle(t, key, testLogs()))
	receipt := encodeBytes(t, NewReceipt("site-1", t0, nil, nil, nil))
	tests := []struct {
		name, input, want string
	}{
		{"unknown field", strings.Replace(string(file), `"tenantId"`, `"colour": "red", "tenantId"`, 1), `unknown field "colour"`},
		{"trailing data", string(file) + "{}", "data after the JSON document"},
		{"another format", strings.Replace(string(file), BundleFormat, "outpost-airgap-bundle/v2", 1),
			`format is "outpost-airgap-bundle/v2", want "outpost-airgap-bundle/v1"`},
		{"a receipt", string(receipt), `format is "outpost-airgap-receipt/v1", want "outpost-airgap-bundle/v1"`},
		{"not JSON", "PK\x03\x04", `line 1 column 1 (byte 0): want an object, found "P"`},
		{"a repeated field", strings.Replace(string(file), `"tenantId"`, `"tenantId": "other", "tenantId"`, 1), `field "tenantId" appears twice`},
		{"a field in another case", strings.Replace(string(file), `"jobId"`, `"JobId"`, 1), `unknown field "JobId"`},
		{"a bad escape", strings.Replace(string(file), `\"`, `\x`, 1), `invalid escape "\\x`},
		{"a lone surrogate", strings.Replace(string(file), `\"`, `\ud800`, 1), `invalid escape "\\ud800"`},
		{"invalid UTF-8", strings.Replace(string(file), "alarm", "al\xffrm", 1), "string is not valid UTF-8"},
		{"a control character", strings.Replace(string(file), "alarm", "al\nrm", 1), "control character 0xa in a string"},
		{"a truncated file", string(file[:len(file)/2]), "line "},
		{"a null time", strings.Replace(string(file), `"createdAt": "`, `"createdAt": null, "x": "`, 1), `want a string, found "n"`},
		{"a repeated entry field", strings.Replace(string(file), `"enqueuedAt"`, `"link": "x", "enqueuedAt"`, 1), `field "link" appears twice`},
		{"an entry field after the last", strings.Replace(string(file), `Z"
        }`, `Z", "kind": "Notification"
        }`, 1), `field "kind" appears twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeBundle(strings.NewReader(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeBundle: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestEntriesReadTheSameInAnyLayout checks that entries laid out as the
// encoder writes them, which the decoder reads by comparing the text
// between values whole, decode exactly as in any other layout.
func TestEntriesReadTheSameInAnyLayout(t *testing.T) {
	key, _ := testKey(t, "site")
	file := encodeBytes(t, signedBundle(t, key, testLogs()))
	want, err := DecodeBundle(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	var compact, tabs, reordered bytes.Buffer
	if err := json.Compact(&compact, file); err != nil {
		t.Fatal(err)
	}
	if err := json.Indent(&tabs, file, "", "\t"); err != nil {
		t.Fatal(err)
	}
	// the link before the tHlc: every line as the encoder writes it, in another order
	reordered.WriteString(regexp.MustCompile(`(?s)("tHlc": "[^"]*",\n)(.*?)(\s*"link": "[^"]*",)`).
		ReplaceAllString(string(file), `${3}${1}${2}`))
	for name, layout := range map[string][]byte{"compact": compact.Bytes(), "tabs": tabs.Bytes(), "reordered": reordered.Bytes()} {
		if bytes.Equal(layout, file) {
			t.Fatalf("%s: the layout did not change", name)
		}
		got, err := DecodeBundle(bytes.NewReader(layout))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded differently from the encoder's layout", name)
		}
	}
}

// TestEscapedPayloadsOfEverySize checks the strings the decoder unescapes,
// which share allocations: payloads from one byte to past the size of one
// allocation (256 KiB), with escapes close together or far apart, each
// read back as it was written.
func TestEscapedPayloadsOfEverySize(t *testing.T) {
	c := newChain("n1")
	var payloads []string
	for _, pattern := range []string{
		`ab"é\`, // text, then escapes (a quote, a backslash), an accent in UTF-8
		`"` + strings.Repeat("plain text, copied a word at a time ", 9) + "\t",
	} {
		for _, size := range []int{1, 100, 4 << 10, 100 << 10, 300 << 10, 10, 200 << 10, 200 << 10} {
			payload := strings.Repeat(pattern, size/len(pattern)+1)[:size]
			payload = strings.ToValidUTF8(payload, "?")
			payloads = append(payloads, payload)
			c.add(fmt.Sprintf("job-%d", len(payloads)), payload)
		}
	}
	key, _ := testKey(t, "site")
	b, err := DecodeBundle(bytes.NewReader(encodeBytes(t, signedBundle(t, key, []JobLog{c.log}))))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range b.JobLogs[0].Entries {
		if e.Payload != payloads[i] {
			t.Errorf("entry %d: payload of %d bytes read back as %d bytes, not as written", i, len(payloads[i]), len(e.Payload))
		}
	}
}

func TestMergeIsDeterministic(t *testing.T) {
	key, _ := testKey(t, "site")
	n1 := newChain("n1").addN("a", 6)
	n2 := newChain("n2").addN("b", 4)
	// n1's second export re-exports a-3 and a-4 after a-0..a-4 went out
	// in the first one.
	first := n1.log
	first.Entries = first.Entries[:5]
	first.ChainHead, first.LastHLC = first.Entries[4].Link, first.Entries[4].THLC
	second := n1.log
	second.Entries = second.Entries[3:]
	prev := first.Entries[2]
	second.Checkpoint = &Checkpoint{Link: prev.Link, HLC: prev.THLC}

	bundles := []Bundle{
		signedBundle(t, key, []JobLog{first}),
		signedBundle(t, key, []JobLog{n2.log, second}),
	}
	for _, b := range bundles {
		if err := Verify(b, VerifyOptions{TrustedKeys: []PublicKey{key.Public()}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	forward, err := Merge(bundles)
	if err != nil {
		t.Fatal(err)
	}
	swapped := []Bundle{bundles[1], bundles[0]}
	slices.Reverse(swapped[0].JobLogs)
	backward, err := Merge(swapped)
	if err != nil {
		t.Fatal(err)
	}

	if !equalMerged(forward, backward) {
		t.Errorf("merge depends on bundle order:\nforward  %+v\nbackward %+v", forward, backward)
	}
	if forward.Duplicates != 2 {
		t.Errorf("Duplicates = %d, want 2 (a-3, a-4 exported twice)", forward.Duplicates)
	}
	var ids []string
	for _, e := range forward.Entries {
		ids = append(ids, e.JobID)
	}
	// Both chains start at t0 and tick one logical step per entry, so the
	// HLC order interleaves them, n1 before n2 at equal HLC.
	want := []string{"a-0", "b-0", "a-1", "b-1", "a-2", "b-2", "a-3", "b-3", "a-4", "a-5"}
	if !slices.Equal(ids, want) {
		t.Errorf("merged order %v, want %v", ids, want)
	}
	wantHeads := []Head{
		{NodeID: "n1", Link: n1.log.ChainHead, HLC: n1.log.LastHLC},
		{NodeID: "n2", Link: n2.log.ChainHead, HLC: n2.log.LastHLC},
	}
	if !slices.Equal(forward.Heads, wantHeads) {
		t.Errorf("heads %+v, want %+v", forward.Heads, wantHeads)
	}
}

func equalMerged(a, b Merged) bool {
	return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b)
}

func TestMergeReportsPayloadMismatch(t *testing.T) {
	n1 := newChain("n1").add("job-1", `{"subject":"one"}`)
	n2 := newChain("n2").add("job-1", `{"subject":"two"}`)
	bundles := []Bundle{NewBundle("site-1", "n1", t0, []JobLog{n1.log}), NewBundle("site-1", "n2", t0, []JobLog{n2.log})}

	merged, err := Merge(bundles)
	var conflictErr *ConflictError
	if !errors.As(err, &conflictErr) {
		t.Fatalf("Merge error = %v, want a *ConflictError", err)
	}
	if len(merged.Conflicts) != 1 || len(conflictErr.Conflicts) != 1 {
		t.Fatalf("conflicts %+v, want one", merged.Conflicts)
	}
	c := merged.Conflicts[0]
	if c.JobID != "job-1" || c.Type != ConflictPayloadMismatch || c.First.NodeID != "n1" || c.Second.NodeID != "n2" {
		t.Errorf("conflict %+v, want job-1 payload-mismatch, n1's kept over n2's", c)
	}
	if len(merged.Entries) != 1 || merged.Entries[0].NodeID != "n1" {
		t.Errorf("entries %+v, want n1's job-1 only", merged.Entries)
	}
	if !strings.Contains(err.Error(), "job job-1: payload-mismatch") {
		t.Errorf("error %q does not name the conflict", err)
	}
}

func testReceipt() Receipt {
	return NewReceipt("site-1", t0, []string{"bundle-1"},
		[]Accepted{{JobID: "a-0", Kind: contract.KindNotification, Status: "Delivered"}, {JobID: "a-1", Kind: contract.KindExternalCall, Status: "Pending"}},
		[]Head{{NodeID: "n1", Link: b64([]byte("link")), HLC: hlc.Timestamp{Physical: t0.UnixMilli()}.String()}})
}

func TestReceipt(t *testing.T) {
	key, pub := testKey(t, "central")
	_, otherPub := testKey(t, "other")
	r := testReceipt()
	if err := r.Sign(key); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "receipt.json")
	writeFile(t, path, r)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decode := func() Receipt {
		r, err := DecodeReceipt(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	trusted := VerifyOptions{TrustedKeys: []PublicKey{pub}}

	if err := VerifyReceipt(decode(), trusted); err != nil {
		t.Fatalf("round trip: %v", err)
	}
	tampered := decode()
	tampered.Accepted[1].Status = "Delivered"
	if err := VerifyReceipt(tampered, trusted); err == nil || !strings.Contains(err.Error(), "receipt digest does not match") {
		t.Errorf("tampered receipt: %v, want a digest mismatch", err)
	}
	if err := VerifyReceipt(decode(), VerifyOptions{TrustedKeys: []PublicKey{otherPub}}); err == nil ||
		!strings.Contains(err.Error(), "signed by untrusted key "+pub.ID()) {
		t.Errorf("untrusted key: %v, want it refused", err)
	}
	if _, err := DecodeBundle(bytes.NewReader(data)); err == nil || !strings.Contains(err.Error(), `format is "outpost-airgap-receipt/v1"`) {
		t.Errorf("receipt decoded as a bundle: %v", err)
	}
}

func TestGenerateKey(t *testing.T) {
	dir := t.TempDir()
	privPath, _, err := GenerateKey(dir, "site")
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(privPath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v, want 0600", info.Mode().Perm())
	}
	before, _ := os.ReadFile(privPath)
	if _, _, err := GenerateKey(dir, "site"); err == nil {
		t.Error("GenerateKey overwrote an existing key")
	}
	if after, _ := os.ReadFile(privPath); !bytes.Equal(before, after) {
		t.Error("the existing private key changed")
	}
	keys, err := LoadTrustedKeys(dir)
	if err != nil || len(keys) != 1 {
		t.Fatalf("LoadTrustedKeys = %v, %v; want the one key", keys, err)
	}
	priv, _ := LoadPrivateKey(privPath)
	if keys[0].ID() != priv.ID() {
		t.Errorf("public key id %s, private %s", keys[0].ID(), priv.ID())
	}
	if _, err := LoadPublicKey(privPath); err == nil {
		t.Error("a private key loaded as a public key")
	}

	bad := filepath.Join(dir, "broken.pub")
	if err := os.WriteFile(bad, []byte("not a key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTrustedKeys(dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadTrustedKeys with a broken file: %v, want an error naming %s", err, bad)
	}
}

func TestDescribeDir(t *testing.T) {
	key, pub := testKey(t, "site")
	dir := t.TempDir()
	b := signedBundle(t, key, testLogs())
	writeFile(t, filepath.Join(dir, "bundle.json"), b)
	r := testReceipt()
	r.CreatedAt = t0.Add(time.Hour)
	r.Digest = receiptDigest(r)
	if err := r.Sign(key); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "receipt.json"), r)
	unsigned := NewBundle("site-1", "n2", t0.Add(-time.Hour), testLogs())
	writeFile(t, filepath.Join(dir, "unsigned.json"), unsigned)
	if err := os.WriteFile(filepath.Join(dir, "notes.json"), []byte(`{"hello": 1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "readme.txt"), []byte("ignored"), 0o644); err != nil {
		t.Fatal(err)
	}

	list, err := DescribeDir(dir, VerifyOptions{TrustedKeys: []PublicKey{pub}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list {
		got = append(got, fmt.Sprintf("%s %s verified=%v", filepath.Base(s.Path), s.Type, s.Verified))
	}
	want := []string{
		"notes.json unknown verified=false", // no createdAt: sorts first
		"unsigned.json bundle verified=false",
		"bundle.json bundle verified=true",
		"receipt.json receipt verified=true",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listing %v, want %v", got, want)
	}
	if list[0].Problem == "" || !strings.Contains(list[1].Problem, "not signed") {
		t.Errorf("problems %q, %q: want the decode error and the missing signature", list[0].Problem, list[1].Problem)
	}
	bundle := list[2]
	if bundle.ID != b.BundleID || bundle.Site != "site-1" || bundle.Entries != 8 ||
		!slices.Equal(bundle.Nodes, []string{"n1", "n2"}) || bundle.Signer != pub.ID() {
		t.Errorf("bundle summary %+v", bundle)
	}
	if rs := list[3]; rs.ID != r.ReceiptID || rs.Entries != 2 || !slices.Equal(rs.Nodes, []string{"n1"}) {
		t.Errorf("receipt summary %+v", rs)
	}
}

// One idempotency key used on two nodes for the same notification is one
// notification: the payloads differ only in which node took it and when.
// For another subject it is a conflict.
func TestMergeTellsOneRequestOnTwoNodesFromAConflict(t *testing.T) {
	submission := func(node, subject string, at time.Time) string {
		b, err := json.Marshal(contract.NotificationSubmission{NotificationID: "job-1", ListName: "ops", Subject: subject,
			SourceSiteID: "site-1", SourceNode: node, SiteEnqueuedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	n1 := newChain("n1").add("job-1", submission("n1", "Tank low", t0))
	same := newChain("n2").add("job-1", submission("n2", "Tank low", t0.Add(time.Minute)))
	other := newChain("n2").add("job-1", submission("n2", "Tank high", t0.Add(time.Minute)))

	merged, err := Merge([]Bundle{NewBundle("site-1", "n1", t0, []JobLog{n1.log}), NewBundle("site-1", "n2", t0, []JobLog{same.log})})
	if err != nil || merged.Duplicates != 1 || len(merged.Entries) != 1 || merged.Entries[0].NodeID != "n1" {
		t.Errorf("same request on two nodes: merged %d entries, %d duplicates, err %v; want n1's entry and 1 duplicate",
			len(merged.Entries), merged.Duplicates, err)
	}
	merged, err = Merge([]Bundle{NewBundle("site-1", "n1", t0, []JobLog{n1.log}), NewBundle("site-1", "n2", t0, []JobLog{other.log})})
	var conflictErr *ConflictError
	if !errors.As(err, &conflictErr) || len(merged.Conflicts) != 1 || merged.Conflicts[0].Type != ConflictPayloadMismatch {
		t.Errorf("another subject under the same key: err %v, conflicts %+v; want one payload-mismatch", err, merged.Conflicts)
	}
}

// The bundle encoder writes the file encoding/json wrote, byte for byte,
// for every shape a bundle takes and every character a payload holds.
func TestEncodeBundleMatchesEncodingJSON(t *testing.T) {
	key, _ := testKey(t, "site")
	tricky := newChain("n1").add("q", "{\"quote\":\"\\\" \\\\ / <b>&amp;</b>\"}").
		add("ctl", "line\nbreak\ttab\r\x01\x1f\b\f").add("uni", "é 😀 \u2028 \u2029 \xff\xfe end")
	pruned := newChain("n2").startAt(hlc.PayloadHash([]byte("pruned")), hlc.Timestamp{Physical: t0.UnixMilli()})
	call := contract.TrackedOperation{OperationID: "call-1", Kind: contract.KindExternalCall, Target: "erp.createOrder",
		Status: contract.StatusDelivered, CreatedAt: t0, UpdatedAt: t0}
	long := newChain("n1") // entries over several of the chunks encoded at once
	for i := range 2*entriesChunk + 3 {
		long.add(fmt.Sprintf("job-%d", i), fmt.Sprintf(`{"seq":%d,"note":"tab\there"}`, i))
	}
	for name, b := range map[string]Bundle{
		"entries over several chunks": NewBundle("site-1", "n1", t0, []JobLog{long.log, tricky.log}),
		"signed, two logs":            signedBundle(t, key, testLogs()),
		"tricky payloads":             NewBundle("site-1", "n1", t0, []JobLog{tricky.log}),
		"checkpoint only":             NewBundle("site-1", "n2", t0, []JobLog{pruned.log}),
		"with calls":                  NewBundle("site-1", "n1", t0, []JobLog{tricky.log}, call),
		"no logs":                     NewBundle("site-1", "n1", t0, nil),
		"empty logs":                  NewBundle("site-1", "n1", t0, []JobLog{}),
		"empty entries":               NewBundle("site-1", "n1", t0, []JobLog{{NodeID: "n1", Entries: []Entry{}}}),
	} {
		t.Run(name, func(t *testing.T) { requireEncodesAsEncodingJSON(t, b) })
	}
}

func TestParseHLCAcceptsOnlyWhatStringWrites(t *testing.T) {
	for _, tt := range []struct {
		text string
		want hlc.Timestamp
		err  string // empty: parses to want
	}{
		{"001700000000123-0000000007", hlc.Timestamp{Physical: 1700000000123, Logical: 7}, ""},
		{"999999999999999-4294967295", hlc.Timestamp{Physical: 999999999999999, Logical: 4294967295}, ""},
		{"1700000000123-7", hlc.Timestamp{}, `hlc timestamp "1700000000123-7" is not written canonically, want "001700000000123-0000000007"`},
		{"+01700000000123-0000000007", hlc.Timestamp{}, "is not written canonically"},
		{"001700000000123-4294967296", hlc.Timestamp{}, "parse hlc timestamp"}, // the right shape, but past a uint32
		{"001700000000123-000000000x", hlc.Timestamp{}, "parse hlc timestamp"},
		{"001700000000123_0000000007", hlc.Timestamp{}, "parse hlc timestamp"},
		{"", hlc.Timestamp{}, "parse hlc timestamp"},
	} {
		got, err := parseHLC(tt.text)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parseHLC(%q) = %v, %v; want %v", tt.text, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseHLC(%q) = %v, %v; want an error containing %q", tt.text, got, err, tt.err)
		}
		if err == nil && got.String() != tt.text {
			t.Errorf("parseHLC(%q) accepted a text String writes as %q", tt.text, got.String())
		}
	}
}

// A receipt's digest covers central's record of each operation it carries,
// and a receipt with none (as every receipt written before receipts
// carried them) keeps the digest it always had, so it still verifies.
func TestReceiptDigestCoversCentralsRecord(t *testing.T) {
	r := testReceipt()
	r.ReceiptID = "5f0c1a52-3c39-4c52-9d0e-0c1d7f0a6b01"
	if got, want := receiptDigest(r), "sha256:326d490f26df6aeb54b0fdaf09c3536930b5f5ee613bb9ed793d2d0d01505c41"; got != want {
		t.Errorf("digest of a receipt without records: %s, want %s as before", got, want)
	}
	delivered := t0.Add(time.Minute)
	r.Accepted[0].RetryCount, r.Accepted[0].DeliveredAt = 1, &delivered
	r.Digest = receiptDigest(r)
	if err := VerifyReceipt(r, VerifyOptions{AllowUnsigned: true}); err != nil {
		t.Fatalf("receipt with a record: %v", err)
	}
	for name, tamper := range map[string]func(*Receipt){
		"retry count":    func(r *Receipt) { r.Accepted[0].RetryCount = 0 },
		"delivered at":   func(r *Receipt) { later := delivered.Add(time.Second); r.Accepted[0].DeliveredAt = &later },
		"last attempt":   func(r *Receipt) { r.Accepted[1].LastAttemptAt = &delivered },
		"record moved":   func(r *Receipt) { r.Accepted[0], r.Accepted[1] = r.Accepted[1], r.Accepted[0] },
		"record dropped": func(r *Receipt) { r.Accepted[0].DeliveredAt = nil },
	} {
		tampered := r
		tampered.Accepted = slices.Clone(r.Accepted)
		tamper(&tampered)
		if err := VerifyReceipt(tampered, VerifyOptions{AllowUnsigned: true}); err == nil || !strings.Contains(err.Error(), "receipt digest does not match") {
			t.Errorf("%s changed: %v, want a digest mismatch", name, err)
		}
	}
}

// appendJSONString writes what encoding/json writes for a string with any
// byte that needs escaping (or U+2028, or invalid UTF-8) at any place
// before, inside or after the eight-byte words it scans whole, alone or
// with a second one after it in the same word or the next (the scan jumps
// to the first in a word and must not skip or invent the second).
func TestJSONStringEscapesAtEveryOffset(t *testing.T) {
	specials := []string{"\"", "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028", "\xff", " ", "~", "!", "#", "[", "]", "<", "&"}
	for _, special := range specials {
		for size := range 26 {
			for at := 0; at <= size; at++ {
				requireStringAsEncodingJSON(t, strings.Repeat("a", at)+special+strings.Repeat("z", size-at))
			}
		}
		for _, second := range specials {
			for at := range 10 {
				for gap := range 10 {
					requireStringAsEncodingJSON(t, strings.Repeat("a", at)+special+strings.Repeat("b", gap)+second+"tail")
				}
			}
		}
	}
}

func requireStringAsEncodingJSON(t *testing.T, s string) {
	t.Helper()
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetEscapeHTML(false) // as the bundle's encoder
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	if got := appendJSONString(nil, s); string(got)+"\n" != want.String() {
		t.Fatalf("%q: wrote %s, encoding/json %s", s, got, want.String())
	}
}

// An export takes each payload's SHA-256 from its payloadHash into the
// manifest digest. A payload that no longer matches its payloadHash when
// the bundle is built (a store changed under the site) is refused on
// import as one changed after export is, and the digest with it; an entry
// whose payloadHash is no SHA-256 at all gets its payload hashed instead.
func TestExportOfAPayloadThatDoesNotMatchItsHashIsRefused(t *testing.T) {
	key, pub := testKey(t, "site")
	trusted := VerifyOptions{TrustedKeys: []PublicKey{pub}}
	for name, tc := range map[string]struct {
		change func(e *Entry)
		want   []string
		// digestHashedThePayload: no payloadHash to take, so the digest
		// hashed the payload, as Verify does, and matches.
		digestHashedThePayload bool
	}{
		"changed payload": {func(e *Entry) { e.Payload = strings.Replace(e.Payload, "alarm", "alarn", 1) },
			[]string{`node "n1" entry 2 (job a-2): payload hash does not match: stored `, "manifest digest does not match"}, false},
		"payloadHash not base64": {func(e *Entry) { e.PayloadHash = "not a hash" },
			[]string{`node "n1" entry 2 (job a-2): payload hash does not match: stored not a hash`}, true},
	} {
		t.Run(name, func(t *testing.T) {
			logs := testLogs()
			tc.change(&logs[0].Entries[2])
			b, err := DecodeBundle(bytes.NewReader(encodeBytes(t, signedBundle(t, key, logs))))
			if err != nil {
				t.Fatal(err)
			}
			report := Verify(b, trusted)
			if report.OK() {
				t.Fatal("verified")
			}
			for _, want := range tc.want {
				if !strings.Contains(report.Err().Error(), want) {
					t.Errorf("report:\n%v\nwant a line containing %q", report.Err(), want)
				}
			}
			if tc.digestHashedThePayload && strings.Contains(report.Err().Error(), "manifest digest") {
				t.Errorf("the digest hashed the payload, as Verify does, yet does not match; report:\n%v", report.Err())
			}
		})
	}
}
