package airgap

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// bundleDecoder reads a bundle file's JSON by hand. encoding/json, driven
// by reflection and scanning every byte twice, takes about twenty times as
// long as hashing the file, and a bundle is nearly all entries: so the
// header, the logs and their entries are parsed here directly, and the
// small or rare parts (signature, checkpoint, calls) still go through
// encoding/json.
//
// It is at least as strict as decodeStrict: field names match exactly, an
// unknown or repeated field is an error, strings must be valid UTF-8 with
// valid escapes, and nothing may follow the document. Whatever it accepts,
// encoding/json decodes to the same Bundle (FuzzDecodeAndVerify checks).
type bundleDecoder struct {
	s         string // the whole file: fields are substrings of it, so most cost no copy
	pos       int
	unescaped []byte       // the strings unescape made (see unescapedRoom)
	layout    *entryLayout // the layout of the last entry read by entryAsEncoded
	ahead     []aheadRun   // entries read ahead on other cores (readahead.go)
	// readingAhead is set on a decoder reading ahead, whose errors are
	// dropped: it skips placing them in the file, which counts lines.
	readingAhead bool
}

func decodeBundleString(s string) (Bundle, error) {
	var ahead []aheadRun
	if runtime.GOMAXPROCS(0) > 1 { // on one core, reading ahead would only add work
		ahead = readAhead(s, pieceBytes)
	}
	return decodeBundleWith(s, ahead)
}

// decodeBundleWith decodes s, taking the runs read ahead where they fit.
func decodeBundleWith(s string, ahead []aheadRun) (Bundle, error) {
	d := &bundleDecoder{s: s, ahead: ahead}
	b, err := d.bundle()
	if err == nil {
		d.skipSpace()
		if d.pos != len(d.s) {
			err = d.errorf("data after the JSON document")
		}
	}
	return b, err
}

func (d *bundleDecoder) bundle() (Bundle, error) {
	var b Bundle
	err := d.object(func(key string) (err error) {
		switch key {
		case "format":
			b.Format, err = d.str()
		case "bundleId":
			b.BundleID, err = d.str()
		case "tenantId":
			b.TenantID, err = d.str()
		case "createdAt":
			b.CreatedAt, err = d.time()
		case "createdByNodeId":
			b.CreatedByNodeID, err = d.str()
		case "manifestDigest":
			b.ManifestDigest, err = d.str()
		case "signature":
			err = d.viaJSON(&b.Signature)
		case "signedBy":
			b.SignedBy, err = d.str()
		case "jobLogs":
			b.JobLogs, err = decodeArray(d, d.jobLog)
		case "calls":
			err = d.viaJSON(&b.Calls)
		default:
			err = d.unknownField(key)
		}
		return err
	})
	return b, err
}

func (d *bundleDecoder) jobLog() (JobLog, error) {
	var log JobLog
	err := d.object(func(key string) (err error) {
		switch key {
		case "nodeId":
			log.NodeID, err = d.str()
		case "lastHlc":
			log.LastHLC, err = d.str()
		case "chainHead":
			log.ChainHead, err = d.str()
		case "checkpoint":
			err = d.viaJSON(&log.Checkpoint)
		case "entries":
			log.Entries, err = d.entries()
		default:
			err = d.unknownField(key)
		}
		return err
	})
	return log, err
}

func (d *bundleDecoder) entry() (Entry, error) {
	if e, ok := d.entryAsEncoded(); ok {
		return e, nil
	}
	var e Entry
	err := d.object(func(key string) error { return d.entryField(&e, key) })
	return e, err
}

// entryField reads the value of e's field key.
func (d *bundleDecoder) entryField(e *Entry, key string) (err error) {
	switch key {
	case "nodeId":
		e.NodeID, err = d.str()
	case "tHlc":
		e.THLC, err = d.str()
	case "jobId":
		e.JobID, err = d.str()
	case "kind":
		e.Kind, err = d.str()
	case "payload":
		e.Payload, err = d.str()
	case "payloadHash":
		e.PayloadHash, err = d.str()
	case "prevLink":
		e.PrevLink, err = d.nullOrStr()
	case "link":
		e.Link, err = d.str()
	case "enqueuedAt":
		e.EnqueuedAt, err = d.time()
	default:
		err = d.unknownField(key)
	}
	return err
}

// entryFields are an entry's fields in the order the bundle encoder
// writes them.
var entryFields = [...]string{"nodeId", "tHlc", "jobId", "kind", "payload", "payloadHash", "prevLink", "link", "enqueuedAt"}

// entryLayout is the text between an entry's values as the bundle encoder
// writes it at one depth: before each value, the line break, indentation
// and key (and the comma after the value before); after the last value,
// the closing brace on its own line.
type entryLayout struct {
	before [len(entryFields)]string
	close  string
}

// newEntryLayout is the layout of an entry whose fields are indented by
// indent, two spaces deeper than its braces.
func newEntryLayout(indent string) *entryLayout {
	l := &entryLayout{close: "\n" + indent[2:] + "}"}
	for i, key := range entryFields {
		sep := ",\n"
		if i == 0 {
			sep = "{\n"
		}
		l.before[i] = sep + indent + `"` + key + `": `
	}
	return l
}

// entryAsEncoded reads the entry at the decoder when it is laid out
// exactly as the bundle encoder writes one, comparing the text between the
// values whole instead of reading it a byte at a time (indentation and
// keys are over a third of a bundle). It accepts nothing the general path
// would not, and reads it the same. For anything else, including a value
// that does not parse, it reports false with the decoder where it started,
// and the general path reads the entry and reports what is wrong.
func (d *bundleDecoder) entryAsEncoded() (Entry, bool) {
	d.skipSpace()
	start := d.pos
	l := d.layoutAt(start)
	if l == nil {
		return Entry{}, false
	}
	var e Entry
	for i, before := range l.before {
		if !strings.HasPrefix(d.s[d.pos:], before) {
			d.pos = start
			return Entry{}, false
		}
		d.pos += len(before)
		if d.entryField(&e, entryFields[i]) != nil {
			d.pos = start
			return Entry{}, false
		}
	}
	if !strings.HasPrefix(d.s[d.pos:], l.close) {
		d.pos = start
		return Entry{}, false
	}
	d.pos += len(l.close)
	return e, true
}

// layoutAt is the layout of the entry starting at pos, judged from its
// first line: the last entry's when that fits, else one made from the
// indentation after the opening brace. It is nil when the brace is not
// followed by a line break and an indentation of at least two spaces.
func (d *bundleDecoder) layoutAt(pos int) *entryLayout {
	rest := d.s[pos:]
	if d.layout != nil && strings.HasPrefix(rest, d.layout.before[0]) {
		return d.layout
	}
	if !strings.HasPrefix(rest, "{\n") {
		return nil
	}
	lines := rest[2:]
	indent := lines[:len(lines)-len(strings.TrimLeft(lines, " "))]
	if len(indent) < 2 {
		return nil
	}
	d.layout = newEntryLayout(indent)
	return d.layout
}

// object reads a JSON object, calling member for each member with the
// decoder at its value, which member reads.
func (d *bundleDecoder) object(member func(key string) error) error {
	if err := d.expect('{', "an object"); err != nil {
		return err
	}
	if d.consume('}') {
		return nil
	}
	seen := make([]string, 0, 12) // stays on the stack: objects here have at most 10 fields
	for {
		d.skipSpace()
		keyAt := d.pos
		key, err := d.str()
		if err != nil {
			return err
		}
		if slices.Contains(seen, key) {
			d.pos = keyAt
			return d.errorf("field %q appears twice", key)
		}
		seen = append(seen, key)
		if err := d.expect(':', "':' after a field name"); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		if d.consume(',') {
			continue
		}
		return d.expect('}', "',' or '}' after a field")
	}
}

// array reads a JSON array, calling elems at each element to read it
// (and, if it can, the elements after it: see entries). It reports whether
// the array was null.
func (d *bundleDecoder) array(elems func() error) (null bool, err error) {
	if d.literal("null") {
		return true, nil
	}
	if err := d.expect('[', "an array"); err != nil {
		return false, err
	}
	if d.consume(']') {
		return false, nil
	}
	for {
		if err := elems(); err != nil {
			return false, err
		}
		if d.consume(',') {
			continue
		}
		return false, d.expect(']', "',' or ']' after an element")
	}
}

// decodeArray reads a JSON array of elements that elem reads. null is a
// nil slice and [] an empty one, as encoding/json decodes them.
func decodeArray[T any](d *bundleDecoder, elem func() (T, error)) ([]T, error) {
	list := []T{}
	null, err := d.array(func() error {
		v, err := elem()
		list = append(list, v)
		return err
	})
	if null || err != nil {
		return nil, err
	}
	return list, nil
}

// viaJSON decodes the value at the decoder into v with encoding/json,
// refusing unknown fields, and moves past it.
func (d *bundleDecoder) viaJSON(v any) error {
	d.skipSpace()
	dec := json.NewDecoder(strings.NewReader(d.s[d.pos:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return d.errorf("%v", err)
	}
	d.pos += int(dec.InputOffset())
	return nil
}

// str reads a JSON string. One without escapes is a substring of the file.
func (d *bundleDecoder) str() (string, error) {
	d.skipSpace()
	if d.pos >= len(d.s) || d.s[d.pos] != '"' {
		return "", d.errorf("want a string, found %s", d.found())
	}
	start := d.pos + 1
	i, seen := skipPlainWords(d.s, start), byte(0) // seen: every byte not skipped ORed, to tell an ASCII string at no cost
	for ; i < len(d.s) && !stringSpecial[d.s[i]]; i++ {
		seen |= d.s[i]
	}
	switch {
	case i == len(d.s):
		d.pos = i
		return "", d.errorf("unterminated string")
	case d.s[i] == '\\':
		return d.unescape(start, i, seen)
	case d.s[i] != '"':
		d.pos = i
		return "", d.errorf("control character %#x in a string", d.s[i])
	}
	d.pos = i + 1
	if seen < utf8.RuneSelf {
		return d.s[start:i], nil // ASCII is valid UTF-8
	}
	return d.checkUTF8(start, d.s[start:i])
}

// skipPlainWords is i moved on eight bytes at a time while every byte is
// plain ASCII in a JSON string (see specialBytes), to the first byte that
// may not be: most of a bundle's strings are base64, ids and HLC text with
// nothing to escape.
func skipPlainWords(s string, i int) int {
	for i+8 <= len(s) {
		if m := specialBytes(word(s, i)); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	return i
}

// stringSpecial marks the bytes that end a run of plain string content:
// the closing quote, a backslash, and the control characters JSON forbids.
var stringSpecial = func() (special [256]bool) {
	for c := range 0x20 {
		special[c] = true
	}
	special['"'], special['\\'] = true, true
	return special
}()

// unescape reads the rest of a string whose content starts at start and
// has its first backslash at i (seen: the bytes before it ORed), in one
// pass, into the decoder's unescaped strings. Most strings with escapes
// are payloads, one per entry, whose JSON has a quote every ten bytes or
// so: plain bytes are copied eight at a time, as appendJSONString writes
// them, up to the next byte that needs a look, and the strings go many to
// one allocation. One whose bytes are all ASCII skips the UTF-8 check.
// Copying each run between quotes by a call of its own was half of
// reading a bundle's entries.
func (d *bundleDecoder) unescape(start, i int, seen byte) (string, error) {
	s := d.s
	buf, mark := d.unescapedRoom()
	buf = append(buf, s[start:i]...)
	for i < len(s) {
		if cap(buf)-len(buf) < utf8.UTFMax+8 { // room for a rune or a word
			buf, mark = moveUnescaped(buf, mark)
		}
		switch c := s[i]; {
		case c == '"':
			d.pos, d.unescaped = i+1, buf
			out := unsafe.String(unsafe.SliceData(buf[mark:]), len(buf)-mark)
			if seen < utf8.RuneSelf {
				return out, nil
			}
			return d.checkUTF8(start, out)
		case c == '\\' && i+1 < len(s) && selfEscaped(s[i+1]):
			buf = append(buf, s[i+1]) // most escapes, quotes inside a payload's JSON: no call
			i += 2
		case c == '\\':
			r, n := escapeAt(s[i:])
			if n == 0 {
				d.pos = i
				return "", d.errorf("invalid escape %q in a string", s[i:min(i+6, len(s))])
			}
			buf = utf8.AppendRune(buf, r)
			seen |= utf8.RuneSelf
			i += n
		case c < 0x20:
			d.pos = i
			return "", d.errorf("control character %#x in a string", c)
		default:
			buf, i = append(buf, c), i+1
			seen |= c
			buf, i = appendPlainWords(buf, s, i)
		}
	}
	d.pos = len(s)
	return "", d.errorf("unterminated string")
}

// appendPlainWords appends s from i eight bytes at a time while they are
// plain ASCII in a JSON string (see specialBytes) and buf has room, and
// returns buf and where in s it stopped. Each word is stored whole past
// buf's end, and only its plain bytes are kept.
func appendPlainWords(buf []byte, s string, i int) ([]byte, int) {
	for i+8 <= len(s) && cap(buf)-len(buf) >= 8 {
		w := word(s, i)
		n := len(buf)
		binary.LittleEndian.PutUint64(buf[n:n+8], w)
		if m := specialBytes(w); m != 0 {
			plain := bits.TrailingZeros64(m) / 8
			return buf[:n+plain], i + plain
		}
		buf, i = buf[:n+8], i+8
	}
	return buf, i
}

// unescapedRoom is where unescape writes its next string, from mark: the
// decoder's unescaped strings, which are only ever appended to, so every
// string taken from them stays as it was. A buffer with little room left
// is replaced, not grown, so a full one is never copied.
func (d *bundleDecoder) unescapedRoom() (buf []byte, mark int) {
	const chunk, room = 256 << 10, 4 << 10
	if cap(d.unescaped)-len(d.unescaped) < room {
		d.unescaped = uninitialized(chunk)[:0]
	}
	return d.unescaped, len(d.unescaped)
}

// moveUnescaped moves the string being unescaped, buf[mark:], to a new
// buffer with room for as much again: a string longer than the room
// unescapedRoom leaves. Nothing was taken from it yet.
func moveUnescaped(buf []byte, mark int) ([]byte, int) {
	grown := uninitialized(2*(len(buf)-mark) + 4<<10)[:0]
	return append(grown, buf[mark:]...), 0
}

// escapeAt decodes the escape at the start of s and returns the rune and
// its length, or a length of 0 when it is not a valid JSON escape. A
// \u escape of half a surrogate pair must be followed by the other half.
func escapeAt(s string) (rune, int) {
	if len(s) < 2 {
		return 0, 0
	}
	if selfEscaped(s[1]) {
		return rune(s[1]), 2
	}
	switch s[1] {
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(s[2:])
		if !ok {
			return 0, 0
		}
		if !utf16.IsSurrogate(r) {
			return r, 6
		}
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if low, ok := hex4(s[8:]); ok {
				if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
					return pair, 12
				}
			}
		}
	}
	return 0, 0
}

// selfEscaped reports whether the escape \c stands for c itself.
func selfEscaped(c byte) bool { return c == '"' || c == '\\' || c == '/' }

func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(s[:4], 16, 32)
	return rune(v), err == nil
}

func (d *bundleDecoder) checkUTF8(start int, s string) (string, error) {
	if !utf8.ValidString(s) {
		d.pos = start
		return "", d.errorf("string is not valid UTF-8")
	}
	return s, nil
}

// nullOrStr reads null (nil) or a string.
func (d *bundleDecoder) nullOrStr() (*string, error) {
	if d.literal("null") {
		return nil, nil
	}
	s, err := d.str()
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// time reads a time as encoding/json writes it: an RFC 3339 string, taken
// as it stands (encoding/json does not unescape a time either).
func (d *bundleDecoder) time() (time.Time, error) {
	d.skipSpace()
	at := d.pos
	s, err := d.str()
	if err != nil {
		return time.Time{}, err
	}
	var t time.Time
	if d.pos-at != len(s)+2 {
		err = errors.New("escapes in a time")
	} else {
		err = t.UnmarshalText([]byte(s))
	}
	if err != nil {
		d.pos = at
		return time.Time{}, d.errorf("%v", err)
	}
	return t, nil
}

func (d *bundleDecoder) skipSpace() {
	for d.pos < len(d.s) {
		switch d.s[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// consume moves past c, and whitespace before it, if c is next.
func (d *bundleDecoder) consume(c byte) bool {
	d.skipSpace()
	if d.pos < len(d.s) && d.s[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *bundleDecoder) expect(c byte, want string) error {
	if !d.consume(c) {
		return d.errorf("want %s, found %s", want, d.found())
	}
	return nil
}

// literal moves past word, and whitespace before it, if word is next.
func (d *bundleDecoder) literal(word string) bool {
	d.skipSpace()
	if strings.HasPrefix(d.s[d.pos:], word) {
		d.pos += len(word)
		return true
	}
	return false
}

func (d *bundleDecoder) unknownField(key string) error {
	return d.errorf("unknown field %q", key)
}

// found names the byte at the decoder, for messages.
func (d *bundleDecoder) found() string {
	if d.pos >= len(d.s) {
		return "the end of the file"
	}
	return strconv.Quote(d.s[d.pos : d.pos+1])
}

// errReadAhead is every error of a decoder reading ahead.
var errReadAhead = errors.New("not an entry")

// errorf says what is wrong and where: the byte offset, and the line and
// column an editor shows.
func (d *bundleDecoder) errorf(format string, args ...any) error {
	if d.readingAhead {
		return errReadAhead
	}
	line := 1 + strings.Count(d.s[:d.pos], "\n")
	col := d.pos - strings.LastIndexByte(d.s[:d.pos], '\n')
	return fmt.Errorf("line %d column %d (byte %d): %s", line, col, d.pos, fmt.Sprintf(format, args...))
}
