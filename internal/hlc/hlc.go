// Package hlc gives every accepted operation a hybrid-logical-clock
// timestamp and a hash-chain link, so an air-gapped site's job log can be
// exported, verified and merged in a total order.
package hlc

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
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
	return string(t.AppendText(make([]byte, 0, 26)))
}

// AppendText appends String's text to b. It formats without fmt because
// every link in a chain hashes this text: writing and verifying a job log
// of a million entries formats it a million times.
func (t Timestamp) AppendText(b []byte) []byte {
	if t.Physical < 0 { // never issued (Next clamps at 0), but String must still say what it holds
		return fmt.Appendf(b, "%015d-%010d", t.Physical, t.Logical)
	}
	b = appendZeroPadded(b, uint64(t.Physical), 15)
	b = append(b, '-')
	return appendZeroPadded(b, uint64(t.Logical), 10)
}

// appendZeroPadded appends v in decimal, left-padded with zeros to width.
func appendZeroPadded(b []byte, v uint64, width int) []byte {
	var digits [20]byte
	d := strconv.AppendUint(digits[:0], v, 10)
	for range width - len(d) {
		b = append(b, '0')
	}
	return append(b, d...)
}

// Parse reads a timestamp written by String.
func Parse(s string) (Timestamp, error) {
	phys, logical, ok := strings.Cut(s, "-")
	p, perr := strconv.ParseInt(phys, 10, 64)
	l, lerr := strconv.ParseUint(logical, 10, 32)
	if !ok || perr != nil || lerr != nil || p < 0 {
		return Timestamp{}, fmt.Errorf("parse hlc timestamp %q: want <physical ms>-<logical>, as String writes it", s)
	}
	return Timestamp{Physical: p, Logical: uint32(l)}, nil
}

// Before reports whether t orders before u.
func (t Timestamp) Before(u Timestamp) bool {
	return t.Physical < u.Physical || (t.Physical == u.Physical && t.Logical < u.Logical)
}

// MaxPhysical is the latest wall-clock reading the clock takes: the end of
// the year 9999, well within String's 15 digits. A reading past it is a
// broken clock, and adopting it would pin every later timestamp to it.
const MaxPhysical int64 = 253402300799999

// Next is the timestamp of a local event after last, at wall-clock nowMillis:
// always after last, even when the wall clock stepped back, stood still for
// more than 2^32 events, or read nonsense (before 1970, after MaxPhysical).
func Next(last Timestamp, nowMillis int64) Timestamp {
	nowMillis = min(max(nowMillis, 0), MaxPhysical)
	switch {
	case nowMillis > last.Physical:
		return Timestamp{Physical: nowMillis}
	case last.Logical == math.MaxUint32:
		// The counter is full: borrow the next millisecond rather than wrap
		// to a timestamp before last.
		return Timestamp{Physical: last.Physical + 1}
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
	var text [26]byte
	sum := linkSum(prevLink, id, string(ts.AppendText(text[:0])), payloadHash) // 26 bytes: converted on the stack
	return sum[:]
}

// LinkOfText is Link of a timestamp given as the text String writes for
// it, as an array. A verifier holds that text already: formatting it again
// for every entry of a bundle is a sizeable share of checking it.
func LinkOfText(prevLink []byte, id, tsText string, payloadHash []byte) [sha256.Size]byte {
	return linkSum(prevLink, id, tsText, payloadHash)
}

// linkSum is not generic over the timestamp's text: a generic function
// called from another package passes for leaking its arguments to the
// heap, which cost the verifier two allocations an entry.
func linkSum(prevLink []byte, id, tsText string, payloadHash []byte) [sha256.Size]byte {
	// One buffer and one Sum256 rather than a hash.Hash and four writes:
	// every enqueue and every entry a bundle verifies computes a link.
	var buf [192]byte
	b := append(buf[:0], prevLink...)
	b = append(b, id...)
	b = append(b, tsText...)
	b = append(b, payloadHash...)
	return sha256.Sum256(b)
}

// ErrTooFarAhead refuses a remote timestamp further ahead of the local wall
// clock than the allowed offset: adopting it would drag every later local
// timestamp that far into the future (CockroachDB's max_offset guard).
var ErrTooFarAhead = errors.New("remote clock is too far ahead")

// Receive is the timestamp of receiving remote (from another node's log, a
// replicated change or an imported receipt) after the local last, at
// wall-clock nowMillis: after both, so causality holds across nodes. A
// remote more than maxOffset ahead of nowMillis is refused with
// ErrTooFarAhead and last is returned unchanged.
func Receive(last, remote Timestamp, nowMillis int64, maxOffset time.Duration) (Timestamp, error) {
	nowMillis = min(max(nowMillis, 0), MaxPhysical)
	if remote.Physical-nowMillis > maxOffset.Milliseconds() {
		return last, fmt.Errorf("%w: %s is %v ahead of this node's clock (max_clock_offset %v)",
			ErrTooFarAhead, remote, time.Duration(remote.Physical-nowMillis)*time.Millisecond, maxOffset)
	}
	latest := last
	if latest.Before(remote) {
		latest = remote
	}
	return Next(latest, nowMillis), nil
}
