package airgap

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// bundleEncoder writes a bundle as it goes, byte for byte what
// encoding/json's Encoder writes with a two-space indent and HTML escaping
// off (TestEncodeBundleMatchesEncodingJSON checks). encoding/json builds the
// whole document in memory and then indents it into a second buffer that
// grows a quarter at a time: for a bundle of 100,000 entries that took
// seconds and twice the file in memory. The small or rare parts
// (signature, checkpoint, calls) still go through encoding/json.
type bundleEncoder struct {
	w io.Writer
	// buf is what is written but not yet out: lines are appended to it
	// and it goes to w in writes of about writeSize bytes.
	buf []byte
	err error
}

// writeSize is about how much the encoder hands its writer at once: few
// calls, and no copy through a second buffer.
const writeSize = 256 << 10

func encodeBundle(w io.Writer, b *Bundle) error {
	e := &bundleEncoder{w: w, buf: make([]byte, 0, writeSize+64<<10)}
	e.open('{', 0)
	e.field(1, "format", b.Format, true)
	e.field(1, "bundleId", b.BundleID, true)
	e.field(1, "tenantId", b.TenantID, true)
	e.raw(1, "createdAt", b.CreatedAt, true)
	e.field(1, "createdByNodeId", b.CreatedByNodeID, true)
	e.field(1, "manifestDigest", b.ManifestDigest, true)
	if b.Signature != nil {
		e.raw(1, "signature", b.Signature, true)
	}
	if b.SignedBy != "" {
		e.field(1, "signedBy", b.SignedBy, true)
	}
	e.key("jobLogs")
	e.array(b.JobLogs == nil, len(b.JobLogs), 1, func(i int) { e.log(&b.JobLogs[i]) })
	if len(b.Calls) > 0 {
		e.comma()
		e.indent(1)
		e.raw(1, "calls", b.Calls, false)
	}
	e.newline()
	e.buf = append(e.buf, "}\n"...)
	e.flush()
	return e.err
}

// array writes a slice of n elements as encoding/json does (null when
// nil, [] when empty), each element on its own lines written by elem, the
// closing bracket at depth.
func (e *bundleEncoder) array(isNil bool, n, depth int, elem func(i int)) {
	switch {
	case isNil:
		e.buf = append(e.buf, "null"...)
		return
	case n == 0:
		e.buf = append(e.buf, "[]"...)
		return
	}
	e.buf = append(e.buf, '[')
	for i := range n {
		e.newline()
		elem(i)
		if i < n-1 {
			e.buf = append(e.buf, ',')
		}
	}
	e.newline()
	e.indent(depth)
	e.buf = append(e.buf, ']')
}

func (e *bundleEncoder) log(l *JobLog) {
	e.element(2, func() {
		e.field(3, "nodeId", l.NodeID, true)
		e.field(3, "lastHlc", l.LastHLC, true)
		e.field(3, "chainHead", l.ChainHead, true)
		if l.Checkpoint != nil {
			e.raw(3, "checkpoint", l.Checkpoint, true)
		}
		e.key("entries")
		if len(l.Entries) == 0 {
			e.array(l.Entries == nil, 0, 3, nil)
			return
		}
		e.buf = append(e.buf, '[')
		e.newline()
		e.entries(l.Entries)
		e.indent(3)
		e.buf = append(e.buf, ']')
	})
}

// entriesChunk is how many entries one goroutine encodes at a time
// (about 800 KB of file).
const entriesChunk = 1024

// entries writes a log's entries, each on its lines and followed by a
// comma but the last: the inside of array's brackets. Entries are most of
// a bundle and each encodes alone, so runs of entriesChunk are encoded on
// every core at once and written in order.
func (e *bundleEncoder) entries(list []Entry) {
	e.flush()
	if e.err != nil {
		return
	}
	e.err = inOrder(len(list), entriesChunk, func(buf []byte, lo, hi int) ([]byte, error) {
		run := encodeEntries(buf, list, lo, hi)
		return run.buf, run.err
	}, func(text []byte) error {
		_, err := e.w.Write(text)
		return err
	})
}

// encodeEntries encodes list[lo:hi] into buf, as entries writes them.
// buf is sized first: growing a megabyte by appends cost more than
// encoding it.
func encodeEntries(buf []byte, list []Entry, lo, hi int) *bundleEncoder {
	size := fieldsSize(list[lo:hi]) + (hi-lo)*entryText
	for i := lo; i < hi; i++ {
		size += len(list[i].Payload)
	}
	run := &bundleEncoder{buf: slices.Grow(buf, size)}
	for i := lo; i < hi; i++ {
		run.entry(&list[i])
		if i < len(list)-1 {
			run.buf = append(run.buf, ',')
		}
		run.buf = append(run.buf, '\n')
	}
	return run
}

// entryText is about what an entry takes in the file beside its strings:
// keys, indents, quotes and its time.
const entryText = 320

// entry writes an entry at depth 4, its members at depth 5. The lines
// between its values are constants: most of a bundle is entries, and
// writing their keys and indents piece by piece cost as much as their
// values.
func (e *bundleEncoder) entry(en *Entry) {
	const member = ",\n          " // after a member: a comma and the next one's indent
	e.buf = append(e.buf, "        {\n          \"nodeId\": "...)
	e.buf = appendJSONString(e.buf, en.NodeID)
	e.buf = append(e.buf, member+`"tHlc": `...)
	e.buf = appendJSONString(e.buf, en.THLC)
	e.buf = append(e.buf, member+`"jobId": `...)
	e.buf = appendJSONString(e.buf, en.JobID)
	e.buf = append(e.buf, member+`"kind": `...)
	e.buf = appendJSONString(e.buf, en.Kind)
	e.buf = append(e.buf, member+`"payload": `...)
	e.buf = appendJSONString(e.buf, en.Payload)
	e.buf = append(e.buf, member+`"payloadHash": `...)
	e.buf = appendJSONString(e.buf, en.PayloadHash)
	e.buf = append(e.buf, member+`"prevLink": `...)
	if en.PrevLink == nil {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = appendJSONString(e.buf, *en.PrevLink)
	}
	e.buf = append(e.buf, member+`"link": `...)
	e.buf = appendJSONString(e.buf, en.Link)
	e.buf = append(e.buf, member+`"enqueuedAt": `...)
	e.time(en)
	e.buf = append(e.buf, "\n        }"...)
}

// element writes an object that is an array element at depth: its members
// (written by members, the last without a comma) at depth+1.
func (e *bundleEncoder) element(depth int, members func()) {
	e.indent(depth)
	e.open('{', depth)
	members()
	e.newline()
	e.indent(depth)
	e.buf = append(e.buf, '}')
}

// open writes c, the start of an object, whose members are at depth+1.
func (e *bundleEncoder) open(c byte, depth int) {
	e.buf = append(e.buf, c)
	e.newline()
	e.indent(depth + 1)
}

// key writes `"name": ` where the line stands (indented by the caller).
func (e *bundleEncoder) key(name string) {
	e.buf = appendJSONString(e.buf, name)
	e.buf = append(e.buf, ": "...)
}

// field writes a string member, and a comma and the next line's indent
// when more members follow.
func (e *bundleEncoder) field(depth int, name, value string, more bool) {
	e.key(name)
	e.buf = appendJSONString(e.buf, value)
	if more {
		e.comma()
		e.indent(depth)
	}
}

// raw writes a member whose value encoding/json encodes, indented to fit.
func (e *bundleEncoder) raw(depth int, name string, v any, more bool) {
	e.key(name)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent(strings.Repeat("  ", depth), "  ")
	if err := enc.Encode(v); err != nil && e.err == nil {
		e.err = err
	}
	e.buf = append(e.buf, bytes.TrimSuffix(out.Bytes(), []byte("\n"))...)
	if more {
		e.comma()
		e.indent(depth)
	}
}

func (e *bundleEncoder) comma() {
	e.buf = append(e.buf, ',')
	e.newline()
}

// newline ends the line, and hands what is written to the writer once it
// is writeSize or more.
func (e *bundleEncoder) newline() {
	e.buf = append(e.buf, '\n')
	if len(e.buf) >= writeSize {
		e.flush()
	}
}

func (e *bundleEncoder) flush() {
	if e.err == nil {
		_, e.err = e.w.Write(e.buf)
	}
	e.buf = e.buf[:0]
}

func (e *bundleEncoder) indent(depth int) {
	for range depth {
		e.buf = append(e.buf, "  "...)
	}
}

// time writes en's enqueuedAt as encoding/json writes a time: its text
// (Time.AppendText, as MarshalJSON), quoted.
func (e *bundleEncoder) time(en *Entry) {
	quoted := append(e.buf, '"')
	text, err := en.EnqueuedAt.AppendText(quoted)
	if err != nil { // a year outside 0-9999: encoding/json fails too
		if e.err == nil {
			e.err = fmt.Errorf("entry %s: enqueuedAt: %w", en.JobID, err)
		}
		return
	}
	e.buf = append(text, '"')
}

const hexDigits = "0123456789abcdef"

// Every byte of a word set to 0x01, and to 0x80.
const (
	ones = 0x0101010101010101
	tops = 0x8080808080808080
)

// word is the 8 bytes of s from i, little-endian (one load: the compiler
// merges the shifts).
func word(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// specialBytes marks, in the top bit of its byte, the first byte of w that
// does not stand as itself in a JSON string (a control character, quote,
// backslash or a byte of non-ASCII), and is 0 when there is none. Each
// test is the classic "has a byte less than n" (x - n*ones) &^ x & tops: a
// borrow can mark bytes above a true one, never below it, so the lowest
// mark is exact, and that is all the caller reads. A quote or backslash is
// a zero byte of w XOR its repetition.
func specialBytes(w uint64) uint64 {
	control := (w - 0x20*ones) &^ w
	quote := w ^ '"'*ones
	backslash := w ^ '\\'*ones
	return (control | (quote-ones)&^quote | (backslash-ones)&^backslash | w) & tops
}

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it with HTML escaping off: quote, backslash and control
// characters escaped (\b \f \n \r \t by name), U+2028 and U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD.
//
// Nearly every byte of a bundle is plain ASCII, and a payload (an
// operation's JSON) has a quote every ten bytes or so: this loop copies
// eight bytes at a time, stored whole and kept up to the first byte that
// needs a second look, and escapes a quote or backslash in place. Anything
// else (a control character, non-ASCII) goes to appendEscaped from there.
// Byte at a time, and then with a copy call for every run between quotes,
// this was most of an export's time.
func appendJSONString(b []byte, s string) []byte {
	// Room for every byte doubled (a quote or backslash becomes two) and
	// for a whole word stored past the last one kept.
	b = slices.Grow(b, 2*len(s)+2+8)
	out := b[len(b):cap(b)]
	out[0] = '"'
	n, i := 1, 0
	for i+8 <= len(s) {
		w := word(s, i)
		binary.LittleEndian.PutUint64(out[n:], w)
		m := specialBytes(w)
		if m == 0 {
			i += 8
			n += 8
			continue
		}
		plain := bits.TrailingZeros64(m) / 8
		i += plain
		n += plain
		c := s[i]
		if c != '"' && c != '\\' {
			break
		}
		out[n], out[n+1] = '\\', c
		n += 2
		i++
	}
	b = appendEscaped(b[:len(b)+n], s[i:])
	return append(b, '"')
}

// appendEscaped appends s escaped as in a JSON string, a byte at a time:
// appendJSONString's way for what is left after a byte other than a quote
// or backslash needs escaping, or under a word.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, `\b`...)
			case '\f':
				b = append(b, `\f`...)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}
