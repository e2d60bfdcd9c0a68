package airgapsync

import (
	"fmt"
	"io"
	"os"

	"github.com/outpost-dev/outpost/internal/airgap"
)

// Bundle is a decoded bundle and the file it came from.
type Bundle struct {
	Path string
	// Bytes is the file's size, recorded with the import.
	Bytes int64
	airgap.Bundle
}

// Receipt is a decoded receipt and the file it came from.
type Receipt struct {
	Path string
	// Bytes is the file's size, recorded with the ack.
	Bytes int64
	airgap.Receipt
}

// ReadBundles decodes the bundle files at paths.
func ReadBundles(paths []string) ([]Bundle, error) {
	var bundles []Bundle
	for _, p := range paths {
		b, size, err := readFile(p, airgap.DecodeBundle)
		if err != nil {
			return nil, err
		}
		bundles = append(bundles, Bundle{Path: p, Bytes: size, Bundle: b})
	}
	return bundles, nil
}

// ReadReceipt decodes the receipt file at path.
func ReadReceipt(path string) (Receipt, error) {
	r, size, err := readFile(path, airgap.DecodeReceipt)
	return Receipt{Path: path, Bytes: size, Receipt: r}, err
}

// readFile decodes the file at path and returns its size.
func readFile[T any](path string, decode func(io.Reader) (T, error)) (T, int64, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return zero, 0, err
	}
	v, err := decode(f)
	if err != nil {
		return zero, 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, info.Size(), nil
}
