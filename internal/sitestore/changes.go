package sitestore

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"
)

// statement is one SQL statement a write ran, with its arguments: a
// replicating store records them in order (writeTx.record), and its
// standby runs them again in the same order on its copy. Every statement
// the store runs is deterministic given the file's state and its
// arguments (times and ids are computed in Go and passed in), so the same
// statements on the same copy leave the same rows.
type statement struct {
	SQL  string
	Args []any
}

// Argument tags in an encoded change.
const (
	argNil byte = iota
	argInt
	argFloat
	argText
	argBlob
	argNamed
)

// encodeStatements writes stmts as: count, then per statement its SQL and
// its arguments, each tagged with its kind. Strings and blobs stay apart:
// SQLite compares them differently.
func encodeStatements(dst []byte, stmts []statement) ([]byte, error) {
	dst = slices.Grow(dst, statementsSize(stmts))
	dst = binary.AppendUvarint(dst, uint64(len(stmts)))
	for _, st := range stmts {
		dst = appendString(dst, st.SQL)
		dst = binary.AppendUvarint(dst, uint64(len(st.Args)))
		for _, a := range st.Args {
			var err error
			if dst, err = appendArg(dst, a); err != nil {
				return nil, fmt.Errorf("statement %.60q: %w", st.SQL, err)
			}
		}
	}
	return dst, nil
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// statementsSize is at least what encodeStatements writes for stmts, so
// that it writes into one allocation. Grown by appending, a change's
// buffer was copied at every doubling: at 5,000 replicated enqueues a
// second those copies were a quarter of the bytes the process allocated,
// and its garbage collections came as often as ten times a second.
func statementsSize(stmts []statement) int {
	n := binary.MaxVarintLen64
	for _, st := range stmts {
		n += 2*binary.MaxVarintLen64 + len(st.SQL)
		for _, a := range st.Args {
			n += argSize(a)
		}
	}
	return n
}

// argSize is at least what appendArg writes for a.
func argSize(a any) int {
	const tagAndNumber = 1 + binary.MaxVarintLen64
	switch v := a.(type) {
	case string:
		return tagAndNumber + len(v)
	case []byte:
		return tagAndNumber + len(v)
	case sql.NamedArg:
		return tagAndNumber + len(v.Name) + argSize(v.Value)
	}
	if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
		return tagAndNumber + rv.Len()
	}
	return tagAndNumber // nil, numbers, bools
}

func appendArg(dst []byte, a any) ([]byte, error) {
	switch v := a.(type) {
	case nil:
		return append(dst, argNil), nil
	case int64:
		return binary.AppendVarint(append(dst, argInt), v), nil
	case int:
		return binary.AppendVarint(append(dst, argInt), int64(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, argFloat), math.Float64bits(v)), nil
	case string:
		return appendString(append(dst, argText), v), nil
	case []byte:
		if v == nil {
			return append(dst, argNil), nil
		}
		return appendBytes(append(dst, argBlob), v), nil
	case bool:
		n := int64(0)
		if v {
			n = 1
		}
		return binary.AppendVarint(append(dst, argInt), n), nil
	case sql.NamedArg:
		dst = appendString(append(dst, argNamed), v.Name)
		return appendArg(dst, v.Value)
	}
	// Named types of the kinds above (contract.Status is a string).
	rv := reflect.ValueOf(a)
	switch rv.Kind() {
	case reflect.String: // as a string, without boxing it again
		return appendString(append(dst, argText), rv.String()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return binary.AppendVarint(append(dst, argInt), rv.Int()), nil
	}
	return nil, fmt.Errorf("argument of type %T cannot be replicated", a)
}

var errBadChange = errors.New("malformed change")

// decodeStatements reads what encodeStatements wrote.
func decodeStatements(b []byte) ([]statement, error) {
	d := decoder{b: b}
	n := d.uvarint()
	if d.err == nil && n > uint64(len(b)) {
		d.err = errBadChange
	}
	stmts := make([]statement, 0, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		st := statement{SQL: string(d.bytes())}
		nargs := d.uvarint()
		if nargs > uint64(len(b)) {
			return nil, errBadChange
		}
		for j := uint64(0); j < nargs && d.err == nil; j++ {
			st.Args = append(st.Args, d.arg())
		}
		stmts = append(stmts, st)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errBadChange
	}
	if d.err != nil {
		return nil, d.err
	}
	return stmts, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errBadChange
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errBadChange
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errBadChange
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) bytes() []byte { return d.take(d.uvarint()) }

func (d *decoder) arg() any {
	tag := d.take(1)
	if d.err != nil {
		return nil
	}
	switch tag[0] {
	case argNil:
		return nil
	case argInt:
		return d.varint()
	case argFloat:
		b := d.take(8)
		if d.err != nil {
			return nil
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b))
	case argText:
		return string(d.bytes())
	case argBlob:
		return append([]byte{}, d.bytes()...)
	case argNamed:
		name := string(d.bytes())
		return sql.Named(name, d.arg())
	}
	d.err = errBadChange
	return nil
}

// MarshalChanges is the wire form of changes between the nodes of a pair:
// each change's number, checksums, commit time and data, one after another.
func MarshalChanges(changes []Change) []byte {
	size := 0
	for _, c := range changes {
		size += 5*binary.MaxVarintLen64 + len(c.Prev) + len(c.Checksum) + len(c.Data)
	}
	out := make([]byte, 0, size)
	for _, c := range changes {
		out = binary.AppendVarint(out, c.Number)
		out = appendBytes(out, c.Prev)
		out = appendBytes(out, c.Checksum)
		out = binary.AppendVarint(out, c.At.UnixNano())
		out = appendBytes(out, c.Data)
	}
	return out
}

// UnmarshalChanges reads what MarshalChanges wrote.
func UnmarshalChanges(b []byte) ([]Change, error) {
	d := decoder{b: b}
	var out []Change
	for len(d.b) > 0 && d.err == nil {
		c := Change{Number: d.varint(), Prev: d.bytes(), Checksum: d.bytes()}
		c.At = time.Unix(0, d.varint())
		c.Data = d.bytes()
		out = append(out, c)
	}
	if d.err != nil {
		return nil, fmt.Errorf("changes from the active node: %w", d.err)
	}
	return out, nil
}
