package airgap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// MaxFileBytes is the largest bundle or receipt file read: a bound on
// memory, far above a site's weeks of operations.
const MaxFileBytes = 1 << 30

// Encode writes v (a Bundle or a Receipt) as indented JSON and a newline.
// A bundle is written as it is encoded (see bundleEncoder).
func Encode(w io.Writer, v any) error {
	var bundle *Bundle
	switch b := v.(type) {
	case Bundle:
		bundle = &b
	case *Bundle:
		bundle = b
	}
	if bundle != nil {
		if err := encodeBundle(w, bundle); err != nil {
			return fmt.Errorf("encode bundle %s: %w", bundle.BundleID, err)
		}
		return nil
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // payloads stay readable: they are never embedded in HTML
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	return nil
}

// DecodeBundle reads a bundle file strictly: no unknown fields, nothing
// after the document, format v1 only, at most MaxFileBytes.
func DecodeBundle(r io.Reader) (Bundle, error) {
	data, err := readFile(r)
	if err != nil {
		return Bundle{}, fmt.Errorf("read bundle: %w", err)
	}
	return decodeBundle(data)
}

// DecodeReceipt reads a receipt file as strictly as DecodeBundle.
func DecodeReceipt(r io.Reader) (Receipt, error) {
	data, err := readFile(r)
	if err != nil {
		return Receipt{}, fmt.Errorf("read receipt: %w", err)
	}
	return decodeReceipt(data)
}

func decodeBundle(data string) (Bundle, error) {
	b, err := decodeBundleString(data)
	if err == nil && b.Format != BundleFormat {
		err = wrongFormat(b.Format, BundleFormat)
	}
	if err != nil {
		return Bundle{}, fmt.Errorf("decode bundle: %w", explainFormat(data, BundleFormat, err))
	}
	return b, nil
}

func decodeReceipt(data string) (Receipt, error) {
	var r Receipt
	err := decodeStrict([]byte(data), &r)
	if err == nil && r.Format != ReceiptFormat {
		err = wrongFormat(r.Format, ReceiptFormat)
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("decode receipt: %w", explainFormat(data, ReceiptFormat, err))
	}
	return r, nil
}

func wrongFormat(found, want string) error {
	return fmt.Errorf("format is %q, want %q", found, want)
}

// explainFormat turns err, the failure to decode data strictly, into a
// wrong-format error when data is a document of another format: a v2 bundle
// or a receipt is better named as such than by the first field v1 does not
// know.
func explainFormat(data string, want string, err error) error {
	found, probeErr := formatOf(data)
	if probeErr == nil && found != want {
		return wrongFormat(found, want)
	}
	return err
}

// readFile reads what is left of r, refusing more than MaxFileBytes, into
// a string: the decoders take its fields as substrings, without copying
// them again. An open file or an in-memory reader is read in parts on
// every core at once (readAtOnce); any other reader through one copy.
func readFile(r io.Reader) (string, error) {
	if ra, ok := r.(readSeekerAt); ok {
		if s, ok, err := readAtOnce(ra); ok {
			return s, err
		}
	}
	var b strings.Builder
	if size, ok := sizeOf(r); ok && size <= MaxFileBytes {
		b.Grow(int(size) + 1) // one allocation, not a doubling series: bundles run to hundreds of MB
	}
	if _, err := io.Copy(&b, io.LimitReader(r, MaxFileBytes+1)); err != nil {
		return "", err
	}
	if b.Len() > MaxFileBytes {
		return "", tooLarge()
	}
	return b.String(), nil
}

func tooLarge() error {
	return fmt.Errorf("file is larger than the %d MiB limit (MaxFileBytes)", MaxFileBytes>>20)
}

// readSeekerAt is a reader that can say where it stands and read at any
// offset: an *os.File, a *bytes.Reader.
type readSeekerAt interface {
	io.Reader
	io.ReaderAt
	io.Seeker
}

// readAtOnce reads r from its offset to its end in as many parts as there
// are cores, each part's copy (and the first touch of its freshly mapped
// pages, which costs as much) on a core of its own, and leaves r at its
// end, as a read to EOF would. ok is false when r's size is unknown: then
// it read nothing. An import reads a file of tens of megabytes in a fresh
// process: there the parts took 78 ms to read and verify a 100,000-entry
// bundle against 87 ms through one copy (median of 8 alternated rounds,
// each after a GC). The buffer is not zeroed first (uninitialized): that
// was a pass of its own, 10 ms of a 100,000-entry bundle's 17 ms read.
func readAtOnce(r readSeekerAt) (s string, ok bool, err error) {
	size, known := sizeOf(r)
	if !known {
		return "", false, nil
	}
	offset, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", false, nil
	}
	n := size - offset
	switch {
	case n > MaxFileBytes:
		return "", true, tooLarge()
	case n <= 0:
		return "", true, nil
	}
	buf := uninitialized(int(n))
	parts := int64(runtime.GOMAXPROCS(0))
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Go(func() {
			if read, err := r.ReadAt(buf[lo:hi], offset+lo); int64(read) < hi-lo {
				errs[p] = fmt.Errorf("read bytes %d to %d: %w (did the file change while it was read?)", offset+lo, offset+hi, err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", true, err
	}
	if _, err := r.Seek(0, io.SeekEnd); err != nil {
		return "", true, err
	}
	return unsafe.String(&buf[0], len(buf)), true, nil
}

// uninitialized is a slice of n bytes whose contents are whatever the
// memory held, for a caller that writes every byte before reading any (a
// read of the whole file, the unescaped strings appended to a buffer).
// make zeroes what it allocates: for a bundle's file that is a pass over
// tens of megabytes, on one core, before the parallel read can start.
// strings.Builder grows without zeroing; the byte written first makes its
// String point at the allocation, which stays alive while the slice does.
func uninitialized(n int) []byte {
	var b strings.Builder
	b.Grow(n)
	b.WriteByte(0)
	return unsafe.Slice(unsafe.StringData(b.String()), n)
}

// sizeOf is how many bytes r holds, when it can tell: an open file or an
// in-memory reader.
func sizeOf(r io.Reader) (int64, bool) {
	switch r := r.(type) {
	case interface{ Stat() (fs.FileInfo, error) }:
		info, err := r.Stat()
		if err != nil || !info.Mode().IsRegular() {
			return 0, false
		}
		return info.Size(), true
	case interface{ Size() int64 }:
		return r.Size(), true
	}
	return 0, false
}

// formatOf reads only the format field of a JSON document.
func formatOf(data string) (string, error) {
	var probe struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal([]byte(data), &probe); err != nil {
		return "", err
	}
	return probe.Format, nil
}

// decodeStrict decodes exactly one JSON value from data into v, refusing
// unknown fields and anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON document")
	}
	return nil
}

// formatTime renders t as JSON does, in UTC, so the same instant written
// with another offset compares equal.
func formatTime(t time.Time) string {
	return t.UTC().Format(time.RFC3339Nano)
}
