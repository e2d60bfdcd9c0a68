package airgap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes v (a Bundle or a Receipt) to path through a temporary
// file renamed into place, so a stick pulled mid-write never holds half a
// file under its name. It returns the file's size.
func WriteFile(path string, v any) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".outpost-airgap-*")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("write %s: directory %s does not exist (is the stick mounted? create the directory first)", path, filepath.Dir(path))
	}
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	size, err := writeDurably(tmp, v)
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return size, nil
}

// writeDurably encodes v to f, flushes it to the medium and closes f; it
// returns the bytes written.
func writeDurably(f *os.File, v any) (int64, error) {
	if err := Encode(f, v); err != nil {
		f.Close()
		return 0, err
	}
	info, err := f.Stat()
	if err := errors.Join(err, f.Sync(), f.Close()); err != nil {
		return 0, err
	}
	return info.Size(), nil
}
