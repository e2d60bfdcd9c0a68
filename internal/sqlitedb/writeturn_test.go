package sqlitedb

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Two opens of one file's turn stand for two processes: flock's locks
// belong to the open file, so they exclude each other as processes do.
func openTwoTurns(t *testing.T) (a, b *WriteTurn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "central.db")
	a, err := OpenWriteTurn(path)
	require.NoError(t, err)
	t.Cleanup(func() { a.Close() })
	b, err = OpenWriteTurn(path)
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	return a, b
}

func takeWithin(t *testing.T, turn *WriteTurn, wait time.Duration) (func(), error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return turn.Take(ctx)
}

// A writer of another process waits while the turn is held and gets it
// as soon as it is given back, without polling.
func TestWriteTurnQueuesWritersOfTwoProcesses(t *testing.T) {
	a, b := openTwoTurns(t)
	doneA, err := a.Take(context.Background())
	require.NoError(t, err)

	got := make(chan time.Time, 1)
	go func() {
		doneB, err := b.Take(context.Background())
		if err == nil {
			got <- time.Now()
			doneB()
		}
	}()
	select {
	case <-got:
		t.Fatal("b took the turn a held")
	case <-time.After(100 * time.Millisecond):
	}
	released := time.Now()
	doneA()
	select {
	case at := <-got:
		require.Less(t, at.Sub(released), 50*time.Millisecond, "b waits in the kernel's queue, not in sleeps")
	case <-time.After(5 * time.Second):
		t.Fatal("b never got the turn a gave back")
	}
}

// A writer that gives up waiting returns its context's error, and the
// turn its wait then obtains goes back at once: it can neither keep the
// file locked nor give back a turn a later writer of its process holds.
func TestWriteTurnGivenUpIsGivenBackAndNeverReleasesALaterHolder(t *testing.T) {
	a, b := openTwoTurns(t)
	doneA, err := a.Take(context.Background())
	require.NoError(t, err)

	_, err = takeWithin(t, b, 50*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "write turn")

	doneA()
	doneB, err := takeWithin(t, b, 5*time.Second)
	require.NoError(t, err, "the abandoned wait kept b's process out")
	time.Sleep(50 * time.Millisecond) // room for a stray give-back to run
	_, err = takeWithin(t, a, 100*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a took the turn b holds: the abandoned wait gave it back")
	doneB()

	doneA, err = takeWithin(t, a, 5*time.Second)
	require.NoError(t, err)
	doneA()
}
