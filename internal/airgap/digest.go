package airgap

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"slices"
	"time"
	"unsafe"

	"github.com/outpost-dev/outpost/contract"
)

// canonical writes a sequence of fields into a SHA-256 unambiguously: a
// string or byte string is its length in bytes as an unsigned varint
// (encoding/binary's uvarint: short, as most fields are) followed by its
// bytes, a number is 8 big-endian bytes, and an optional value is a 0 byte
// when absent or a 1 byte followed by the value. Since every field's extent
// is explicit, no two different sequences of fields hash the same input,
// which json.Marshal (field order, escaping, number forms) cannot promise.
type canonical struct {
	// h is the hash; nil for a run of entries encoded apart, whose fields
	// only gather in buf to be appended in order.
	h hash.Hash
	// buf gathers the many small fields into large hash writes.
	buf []byte
}

// canonicalSpill is how much gathers in buf before it goes to the hash.
const canonicalSpill = 64 << 10

func newCanonical(domain string) *canonical {
	c := &canonical{h: sha256.New(), buf: make([]byte, 0, 2*canonicalSpill)}
	c.str(domain)
	return c
}

func (c *canonical) str(s string) {
	c.length(len(s))
	c.buf = append(c.buf, s...)
	c.spill()
}

func (c *canonical) bytes(b []byte) {
	c.length(len(b))
	c.buf = append(c.buf, b...)
	c.spill()
}

func (c *canonical) length(n int) {
	c.buf = binary.AppendUvarint(c.buf, uint64(n))
}

func (c *canonical) uint(v uint64) {
	c.buf = binary.BigEndian.AppendUint64(c.buf, v)
}

func (c *canonical) present(ok bool) {
	if ok {
		c.buf = append(c.buf, 1)
	} else {
		c.buf = append(c.buf, 0)
	}
}

// spill hashes what gathered once it is large.
func (c *canonical) spill() {
	if c.h != nil && len(c.buf) >= canonicalSpill {
		c.h.Write(c.buf) // writes to a hash never fail
		c.buf = c.buf[:0]
	}
}

// encoded appends fields encoded apart (by a canonical without a hash).
func (c *canonical) encoded(fields []byte) {
	c.h.Write(c.buf)
	c.buf = c.buf[:0]
	c.h.Write(fields)
}

// time writes t as present and its Unix nanoseconds, or as absent.
func (c *canonical) time(t *time.Time) {
	c.present(t != nil)
	if t != nil {
		c.uint(uint64(t.UnixNano()))
	}
}

// digest is "sha256:" and the hex of the hash of everything written.
func (c *canonical) digest() string {
	c.h.Write(c.buf)
	c.buf = c.buf[:0]
	return "sha256:" + hex.EncodeToString(c.h.Sum(nil))
}

// ManifestDigest is the digest a bundle's signature covers its logs by:
// "sha256:" and the hex SHA-256 of, in the encoding of canonical,
//
//	"outpost-airgap-manifest/v1", the number of logs, then per log:
//	  nodeId, lastHlc, chainHead,
//	  checkpoint: absent, or present and its link, hlc,
//	  the number of entries, then per entry:
//	    nodeId, tHlc, jobId, kind,
//	    payload, as its SHA-256 (32 bytes),
//	    payloadHash,
//	    prevLink: absent (null) or present and its value,
//	    link, enqueuedAt as Unix nanoseconds (two's complement uint64).
//
// Strings are hashed exactly as they stand in the file (base64 and HLC text
// included), so any change to any field changes the digest. The payload
// goes in by its SHA-256, which binds it as firmly as its bytes would and
// lets Verify hash each payload once for both this digest and the
// payloadHash check: payload hashing is most of a bundle's verification.
func ManifestDigest(logs []JobLog, calls ...contract.TrackedOperation) string {
	return manifestDigest(logs, calls, sumsIn(payloadSums(logs)))
}

// payloadSumOf is the SHA-256 of the payload of entry number entry of log
// number log, for manifestDigest.
type payloadSumOf func(log, entry int) [sha256.Size]byte

// payloadSums is the SHA-256 of every entry's payload (hlc.PayloadHash,
// kept as arrays: one allocation per log, not per entry), per log,
// computed on every core.
func payloadSums(logs []JobLog) [][][sha256.Size]byte {
	sums := make([][][sha256.Size]byte, len(logs))
	for i, log := range logs {
		sums[i] = make([][sha256.Size]byte, len(log.Entries))
		inChunks(len(log.Entries), chunkSize, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				sums[i][j] = sha256.Sum256(stringBytes(log.Entries[j].Payload))
			}
		})
	}
	return sums
}

// sumsIn gives the sums payloadSums computed.
func sumsIn(sums [][][sha256.Size]byte) payloadSumOf {
	return func(log, entry int) [sha256.Size]byte { return sums[log][entry] }
}

// loggedPayloadSums gives each payload's SHA-256 as its entry states it:
// the payloadHash decoded, which the site computed when it logged the
// entry, and the payload hashed only where payloadHash is not a SHA-256 in
// base64. An export builds its digest so: hashing every payload again was
// a third of its time. It binds the payloads no less: the digest binds
// every payloadHash, and Verify refuses an entry whose payload does not
// match its payloadHash (and then the digest too). Each is decoded where
// the digest's encoders read the entry anyway, on every core: a pass of
// its own over the entries, into a table, was a quarter of a bundle's
// digest time.
func loggedPayloadSums(logs []JobLog) payloadSumOf {
	return func(log, entry int) [sha256.Size]byte {
		e := &logs[log].Entries[entry]
		if sum, ok := loggedSum(e.PayloadHash); ok {
			return sum
		}
		return sha256.Sum256(stringBytes(e.Payload))
	}
}

// loggedSum decodes a payloadHash, a SHA-256 in base64 (44 characters).
func loggedSum(payloadHash string) (sum [sha256.Size]byte, ok bool) {
	if len(payloadHash) != base64.StdEncoding.EncodedLen(sha256.Size) {
		return sum, false
	}
	var decoded [sha256.Size + 1]byte // what 44 characters may decode to
	n, err := base64.StdEncoding.Decode(decoded[:], stringBytes(payloadHash))
	return [sha256.Size]byte(decoded[:sha256.Size]), err == nil && n == sha256.Size
}

// stringBytes is s's bytes without a copy, to be read only: []byte(s)
// copied every payload of a bundle before hashing it.
func stringBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// manifestDigest is ManifestDigest with every payload's SHA-256 given by
// sumOf.
func manifestDigest(logs []JobLog, calls []contract.TrackedOperation, sumOf payloadSumOf) string {
	c := newCanonical("outpost-airgap-manifest/v1")
	c.uint(uint64(len(logs)))
	for i, log := range logs {
		c.str(log.NodeID)
		c.str(log.LastHLC)
		c.str(log.ChainHead)
		c.present(log.Checkpoint != nil)
		if log.Checkpoint != nil {
			c.str(log.Checkpoint.Link)
			c.str(log.Checkpoint.HLC)
		}
		c.uint(uint64(len(log.Entries)))
		writeEntries(c, log.Entries, func(entry int) [sha256.Size]byte { return sumOf(i, entry) })
	}
	c.uint(uint64(len(calls)))
	for _, call := range calls {
		row, _ := json.Marshal(call) // a struct of strings, numbers and times: it always encodes, the same way
		c.bytes(row)
	}
	return c.digest()
}

// writeEntries writes entries, the SHA-256 of entry j's payload given by
// sumOf(j). Reading every field of every entry is most of the digest's
// time, so runs of them are encoded on every core at once and hashed in
// order.
func writeEntries(c *canonical, entries []Entry, sumOf func(j int) [sha256.Size]byte) {
	encode := func(buf []byte, lo, hi int) ([]byte, error) {
		// Sized first, as encodeEntries: the payloads go in as their sums.
		run := canonical{buf: slices.Grow(buf, fieldsSize(entries[lo:hi])+(hi-lo)*entryManifest)}
		for j := lo; j < hi; j++ {
			sum := sumOf(j)
			writeEntry(&run, entries[j], &sum)
		}
		return run.buf, nil
	}
	_ = inOrder(len(entries), chunkSize, encode, func(fields []byte) error { // nothing fails
		c.encoded(fields)
		return nil
	})
}

// entryManifest is about what an entry takes in the manifest beside its
// strings but the payload: lengths, payload sum, presence and time.
const entryManifest = 64

// fieldsSize is the length of entries' strings but their payloads.
func fieldsSize(entries []Entry) int {
	n := 0
	for i := range entries {
		e := &entries[i]
		n += len(e.NodeID) + len(e.THLC) + len(e.JobID) + len(e.Kind) + len(e.PayloadHash) + 2*len(e.Link)
	}
	return n
}

func writeEntry(c *canonical, e Entry, payloadSum *[sha256.Size]byte) {
	c.str(e.NodeID)
	c.str(e.THLC)
	c.str(e.JobID)
	c.str(e.Kind)
	c.bytes(payloadSum[:])
	c.str(e.PayloadHash)
	c.present(e.PrevLink != nil)
	if e.PrevLink != nil {
		c.str(*e.PrevLink)
	}
	c.str(e.Link)
	c.uint(uint64(e.EnqueuedAt.UnixNano()))
}
