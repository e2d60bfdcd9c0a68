package sqlitedb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// WriteTurn queues the writers of one SQLite file, across processes: a
// writer takes the turn, runs its one transaction, and gives the turn
// back. SQLite lets one writer in at a time, but a writer that finds the
// file locked sleeps in its busy handler (1 to 100 ms a try) rather than
// waiting in line, so writers from two processes on one file left the lock
// idle between them. The turn is an flock(2) on a file beside the
// database: the kernel wakes the next waiter as soon as it is free.
//
// Within a process one writer at a time asks the kernel (a token), so that
// a writer that gave up waiting can never give back a turn another writer
// of the same process holds: flock's locks belong to the open file, not
// to the goroutine.
type WriteTurn struct {
	file  *os.File
	token chan struct{}
}

// OpenWriteTurn opens (creating if needed) the turn of the SQLite file at
// dbPath: the file dbPath+"-turn".
func OpenWriteTurn(dbPath string) (*WriteTurn, error) {
	f, err := os.OpenFile(dbPath+"-turn", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the write turn: %w", err)
	}
	return &WriteTurn{file: f, token: make(chan struct{}, 1)}, nil
}

// Take waits for the turn and returns what gives it back. When ctx ends
// first it returns ctx's error, and the turn it was waiting for is given
// back as soon as the kernel grants it.
func (w *WriteTurn) Take(ctx context.Context) (done func(), err error) {
	select {
	case w.token <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the store's write turn: %w", ctx.Err())
	}
	if err := w.flock(syscall.LOCK_EX | syscall.LOCK_NB); err == nil {
		return w.giveBack, nil
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		<-w.token
		return nil, err
	}
	got := make(chan error, 1)
	go func() { got <- w.flock(syscall.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			<-w.token
			return nil, err
		}
		return w.giveBack, nil
	case <-ctx.Done():
		go func() {
			if <-got == nil {
				w.giveBack()
				return
			}
			<-w.token
		}()
		return nil, fmt.Errorf("wait for the store's write turn: %w", ctx.Err())
	}
}

func (w *WriteTurn) giveBack() {
	_ = w.flock(syscall.LOCK_UN) // closing the file would release it too
	<-w.token
}

func (w *WriteTurn) flock(how int) error {
	for {
		err := syscall.Flock(int(w.file.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			if err != nil && !errors.Is(err, syscall.EWOULDBLOCK) {
				return fmt.Errorf("lock %s: %w", w.file.Name(), err)
			}
			return err
		}
	}
}

// Close closes the turn's file, which gives back a turn still held.
func (w *WriteTurn) Close() error { return w.file.Close() }
