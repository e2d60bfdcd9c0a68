package sqlitedb

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrReplaced is a store file removed or replaced while open: SQLite
// would go on writing to the unlinked file, and everything written from
// then on would be gone at the next start.
var ErrReplaced = errors.New("store file was removed or replaced while open")

// Guard remembers which file a path named when the store opened it.
type Guard struct {
	path     string
	dev, ino uint64
}

// NewGuard records the file at path now.
func NewGuard(path string) (*Guard, error) {
	dev, ino, err := identity(path)
	if err != nil {
		return nil, err
	}
	return &Guard{path: path, dev: dev, ino: ino}, nil
}

// Check returns ErrReplaced, with what happened and what to do, unless
// path still names the file the store opened.
func (g *Guard) Check() error {
	dev, ino, err := identity(g.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: %w (it no longer exists): nothing more is accepted; restore the file or restart to start a new store", g.path, ErrReplaced)
	case err != nil:
		return fmt.Errorf("%s: %w", g.path, err)
	case dev != g.dev || ino != g.ino:
		return fmt.Errorf("%s: %w (another file now has its name): nothing more is accepted; restart to use the new file", g.path, ErrReplaced)
	}
	return nil
}

func identity(path string) (dev, ino uint64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, fmt.Errorf("stat store file: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, nil // no inode on this platform: nothing to compare
	}
	return uint64(st.Dev), st.Ino, nil //nolint:unconvert // Dev's type differs by platform
}
