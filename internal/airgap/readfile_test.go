package airgap

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadFileReadsWhatIsLeft checks that a file, an in-memory reader (both
// read in parts at once) and a plain reader (one copy) give the bytes from
// where each stands to its end, and leave it at its end.
func TestReadFileReadsWhatIsLeft(t *testing.T) {
	content := strings.Repeat("0123456789abcdef", 100_003) // parts that do not split evenly
	path := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readers := map[string]io.Reader{
		"file":           f,
		"bytes.Reader":   bytes.NewReader([]byte(content)),
		"plain reader":   io.MultiReader(strings.NewReader(content)),
		"strings.Reader": strings.NewReader(content),
	}
	for name, r := range readers {
		if _, err := io.CopyN(io.Discard, r, 7); err != nil {
			t.Fatal(err)
		}
		got, err := readFile(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != content[7:] {
			t.Errorf("%s: read %d bytes, want the %d after the first 7", name, len(got), len(content)-7)
		}
		if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("%s: after readFile, Read = %d, %v; want 0, EOF", name, n, err)
		}
	}
}

// shrunk is a reader whose ReadAt finds less than its size promised, as a
// file cut short while it is read.
type shrunk struct{ *bytes.Reader }

func (s shrunk) ReadAt(p []byte, off int64) (int, error) {
	n, _ := s.Reader.ReadAt(p[:len(p)/2], off)
	return n, io.EOF
}

func TestReadFileRefusesAFileCutShortWhileRead(t *testing.T) {
	_, err := readFile(shrunk{bytes.NewReader(make([]byte, 1<<20))})
	if err == nil || !errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "did the file change while it was read?") {
		t.Fatalf("readFile of a file cut short = %v, want an error saying where the read came up short", err)
	}
}
