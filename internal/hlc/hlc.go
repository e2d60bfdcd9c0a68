// Package hlc gives every buffered operation a hybrid-logical-clock timestamp
// and a hash-chain link, so an air-gapped site's buffer can later
// be exported, verified and merged in a total order.
package hlc

import (
	"crypto/sha256"
	"fmt"
)

// Timestamp is a hybrid logical clock reading: wall-clock milliseconds, and a
// counter that orders events within the same millisecond or while the wall
// clock stands still or steps back.
type Timestamp struct {
	Physical int64  // Unix milliseconds
	Logical  uint32 // counter within Physical
}

// String renders t with fixed widths, so timestamps sort as strings.
func (t Timestamp) String() string {
	return fmt.Sprintf("%015d-%010d", t.Physical, t.Logical)
}

// Parse reads a timestamp written by String.
func Parse(s string) (Timestamp, error) {
	var t Timestamp
	if _, err := fmt.Sscanf(s, "%015d-%010d", &t.Physical, &t.Logical); err != nil {
		return Timestamp{}, fmt.Errorf("parse hlc timestamp %q: %w", s, err)
	}
	return t, nil
}

// Before reports whether t orders before u.
func (t Timestamp) Before(u Timestamp) bool {
	return t.Physical < u.Physical || (t.Physical == u.Physical && t.Logical < u.Logical)
}

// Next is the timestamp of a local event after last, at wall-clock nowMillis:
// always after last, even when the wall clock stepped back.
func Next(last Timestamp, nowMillis int64) Timestamp {
	if nowMillis > last.Physical {
		return Timestamp{Physical: nowMillis}
	}
	return Timestamp{Physical: last.Physical, Logical: last.Logical + 1}
}

// PayloadHash is the SHA-256 of an operation's payload.
func PayloadHash(payload []byte) []byte {
	sum := sha256.Sum256(payload)
	return sum[:]
}

// Link is the hash-chain link of an entry:
// SHA-256(prevLink || id || timestamp || payloadHash). prevLink is empty for a
// node's first entry.
func Link(prevLink []byte, id string, ts Timestamp, payloadHash []byte) []byte {
	h := sha256.New()
	h.Write(prevLink)
	h.Write([]byte(id))
	h.Write([]byte(ts.String()))
	h.Write(payloadHash)
	return h.Sum(nil)
}
