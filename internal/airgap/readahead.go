package airgap

import (
	"slices"
	"strings"
)

// A bundle is nearly all entries, and the decoder reads them one after
// another on one core. So before it starts, the file is cut into pieces
// and every core reads entries ahead, one piece at a time, each from the
// first place in its piece that parses as an entry. Such a guess can be
// wrong: a brace inside a payload, or a log's own object, may parse as far
// as the first field. Nothing is trusted for that reason. The decoder takes
// a run read ahead only when its own walk arrives at an array element that
// starts exactly where the run starts. An entry reads the same from the
// same offset whatever came before it, so the run holds exactly what the
// decoder would have read there itself, and the decoder carries on from
// where the run ends. Whatever no run covers (a piece whose guess went
// nowhere, an entry that does not parse) the decoder reads in order, as it
// always has, and reports with the same message.

// pieceBytes is the size of a piece: large beside an entry (most are under
// a kilobyte), small enough that a bundle of tens of megabytes keeps every
// core busy until the end.
const pieceBytes = 1 << 20

// aheadRun is a run of entries read ahead: consecutive elements of one
// entries array, from the '{' of the first to just after the '}' of the
// last.
type aheadRun struct {
	start, end int
	entries    []Entry
}

// readAhead reads the entries of s's pieces, piece bytes each, on every
// core, and returns the runs found, in the order of their starts. A file
// of less than two pieces gets none.
func readAhead(s string, piece int) []aheadRun {
	pieces := len(s) / piece
	if pieces < 2 {
		return nil
	}
	runs := make([]aheadRun, pieces)
	inChunks(pieces, 1, func(i, _ int) {
		hi := (i + 1) * piece
		if i == pieces-1 {
			hi = len(s)
		}
		runs[i] = readRunIn(s, i*piece, hi)
	})
	found := runs[:0]
	for _, r := range runs {
		if len(r.entries) > 0 {
			found = append(found, r)
		}
	}
	return found
}

// readRunIn reads the run of entries that starts at the first brace in
// [lo, hi) from which at least one entry parses. It reads on past hi to the
// end of the entry that crosses it: the next run starts at the entry after.
func readRunIn(s string, lo, hi int) aheadRun {
	d := &bundleDecoder{s: s, readingAhead: true}
	for at := lo; at < hi; at++ {
		brace := strings.IndexByte(s[at:hi], '{')
		if brace < 0 {
			break
		}
		at += brace
		d.pos = at
		if r := d.runFrom(hi); len(r.entries) > 0 {
			return r
		}
	}
	return aheadRun{}
}

// runFrom reads entries from the decoder's position, each but the last
// followed by a comma, until one fails to parse, one is not followed by a
// comma, or the next one would start at or after limit.
func (d *bundleDecoder) runFrom(limit int) aheadRun {
	r := aheadRun{start: d.pos}
	for {
		e, err := d.entry()
		if err != nil {
			return r
		}
		if r.entries == nil { // room for as many more as fit in the piece, at this one's size
			r.entries = make([]Entry, 0, (limit-r.start)/(d.pos-r.start)+2)
		}
		r.entries, r.end = append(r.entries, e), d.pos
		if !d.consume(',') {
			return r
		}
		if d.skipSpace(); d.pos >= limit {
			return r
		}
	}
}

// runAt is the run read ahead that starts at pos, or nil. The decoder asks
// in the order of the file, so the runs before pos are dropped.
func (d *bundleDecoder) runAt(pos int) *aheadRun {
	for len(d.ahead) > 0 && d.ahead[0].start < pos {
		d.ahead = d.ahead[1:]
	}
	if len(d.ahead) > 0 && d.ahead[0].start == pos {
		return &d.ahead[0]
	}
	return nil
}

// entries reads a log's entries array as decodeArray would: each run read
// ahead that starts where an element does, and the entries no run covers
// one by one, joined once at the end (a log of 100,000 entries is 16 MB
// of them).
func (d *bundleDecoder) entries() ([]Entry, error) {
	var parts [][]Entry
	var own []Entry // read here since the last run
	null, err := d.array(func() error {
		d.skipSpace()
		if r := d.runAt(d.pos); r != nil {
			parts, own = append(parts, own, r.entries), nil
			d.pos = r.end
			return nil
		}
		e, err := d.entry()
		own = append(own, e)
		return err
	})
	if null || err != nil {
		return nil, err
	}
	if list := slices.Concat(append(parts, own)...); list != nil {
		return list, nil
	}
	return []Entry{}, nil // [], as encoding/json decodes it
}
