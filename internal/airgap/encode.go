package airgap

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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
	w   *bufio.Writer
	buf []byte // the line being written
	err error
}

func encodeBundle(w io.Writer, b *Bundle) error {
	e := &bundleEncoder{w: bufio.NewWriterSize(w, 256<<10)}
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
	e.flushLine()
	if e.err == nil {
		e.err = e.w.Flush()
	}
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
		e.array(l.Entries == nil, len(l.Entries), 3, func(i int) { e.entry(&l.Entries[i]) })
	})
}

func (e *bundleEncoder) entry(en *Entry) {
	e.element(4, func() {
		e.field(5, "nodeId", en.NodeID, true)
		e.field(5, "tHlc", en.THLC, true)
		e.field(5, "jobId", en.JobID, true)
		e.field(5, "kind", en.Kind, true)
		e.field(5, "payload", en.Payload, true)
		e.field(5, "payloadHash", en.PayloadHash, true)
		e.key("prevLink")
		if en.PrevLink == nil {
			e.buf = append(e.buf, "null"...)
		} else {
			e.buf = appendJSONString(e.buf, *en.PrevLink)
		}
		e.comma()
		e.indent(5)
		e.field(5, "link", en.Link, true)
		e.key("enqueuedAt")
		e.time(en)
	})
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

// newline ends the line and writes it out.
func (e *bundleEncoder) newline() {
	e.buf = append(e.buf, '\n')
	e.flushLine()
}

func (e *bundleEncoder) flushLine() {
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

// time writes en's enqueuedAt as encoding/json writes a time.
func (e *bundleEncoder) time(en *Entry) {
	t, err := en.EnqueuedAt.MarshalJSON()
	if err != nil && e.err == nil { // a year outside 0-9999: encoding/json fails too
		e.err = fmt.Errorf("entry %s: enqueuedAt: %w", en.JobID, err)
	}
	e.buf = append(e.buf, t...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it with HTML escaping off: quote, backslash and control
// characters escaped (\b \f \n \r \t by name), U+2028 and U+2029 escaped,
// invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
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
	b = append(b, s[start:]...)
	return append(b, '"')
}
