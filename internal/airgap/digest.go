package airgap

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"time"

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
	h       hash.Hash
	w       *bufio.Writer // batches the many small fields into large hash writes
	scratch [binary.MaxVarintLen64]byte
}

func newCanonical(domain string) *canonical {
	h := sha256.New()
	c := &canonical{h: h, w: bufio.NewWriterSize(h, 64<<10)}
	c.str(domain)
	return c
}

func (c *canonical) str(s string) {
	c.length(len(s))
	c.w.WriteString(s) // writes to a hash never fail
}

func (c *canonical) bytes(b []byte) {
	c.length(len(b))
	c.w.Write(b)
}

// length and uint encode into c.scratch: a local array would escape to
// the heap through the writer, an allocation per field.
func (c *canonical) length(n int) {
	c.w.Write(binary.AppendUvarint(c.scratch[:0], uint64(n)))
}

func (c *canonical) uint(v uint64) {
	c.w.Write(binary.BigEndian.AppendUint64(c.scratch[:0], v))
}

func (c *canonical) present(ok bool) {
	if ok {
		c.w.WriteByte(1)
	} else {
		c.w.WriteByte(0)
	}
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
	c.w.Flush()
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
	return manifestDigest(logs, calls, payloadSums(logs))
}

// payloadSums is the SHA-256 of every entry's payload (hlc.PayloadHash,
// kept as arrays: one allocation per log, not per entry), per log,
// computed on every core.
func payloadSums(logs []JobLog) [][][sha256.Size]byte {
	sums := make([][][sha256.Size]byte, len(logs))
	for i, log := range logs {
		sums[i] = make([][sha256.Size]byte, len(log.Entries))
		inChunks(len(log.Entries), chunkSize, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				sums[i][j] = sha256.Sum256([]byte(log.Entries[j].Payload))
			}
		})
	}
	return sums
}

// manifestDigest is ManifestDigest with every payload's SHA-256 given, as
// payloadSums computes them.
func manifestDigest(logs []JobLog, calls []contract.TrackedOperation, sums [][][sha256.Size]byte) string {
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
		for j, e := range log.Entries {
			writeEntry(c, e, &sums[i][j])
		}
	}
	c.uint(uint64(len(calls)))
	for _, call := range calls {
		row, _ := json.Marshal(call) // a struct of strings, numbers and times: it always encodes, the same way
		c.bytes(row)
	}
	return c.digest()
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
