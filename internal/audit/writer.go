package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-dev/outpost/internal/centralstore"
)

// Store is where a Writer puts events; *centralstore.Store.
type Store interface {
	InsertAuditEvents(ctx context.Context, events []centralstore.AuditEvent) (int, error)
}

// Options tune a Writer. Zero fields take their defaults.
type Options struct {
	// BatchSize is the most events one write carries. Default 500.
	BatchSize int
	// Delay is how long the first queued event waits for others to share
	// its write. Default 200ms.
	Delay time.Duration
	// RetryInterval is the wait after a failed write before the next try.
	// Default 1s.
	RetryInterval time.Duration
	// MaxQueue bounds the events held in memory while writes fail; past it
	// the oldest are dropped and counted (Dropped). Default 100,000.
	MaxQueue int
	// WriteTimeout bounds one write. Default 30s.
	WriteTimeout time.Duration
	// Observe, when set, sees every event as it is recorded (metrics count
	// attempts and outcomes with it). It must not block.
	Observe func(centralstore.AuditEvent)
}

func (o Options) withDefaults() Options {
	if o.BatchSize <= 0 {
		o.BatchSize = 500
	}
	if o.Delay <= 0 {
		o.Delay = 200 * time.Millisecond
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = time.Second
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = 100_000
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	return o
}

// Writer writes audit events to the store in batches, in the background.
// Record never blocks and never fails; a failed write is counted (Failures)
// and its events are written again later, in order, until they are stored
// or the queue's bound drops them. Events live in memory until written: a
// process that dies loses what it had not written yet.
type Writer struct {
	store Store
	opts  Options

	mu sync.Mutex
	// queue holds the events not written yet, oldest first, but for the
	// batch being written.
	queue []centralstore.AuditEvent
	// pending holds the ids in queue or being written: an event recorded
	// again meanwhile is not queued twice.
	pending map[string]struct{}
	lastErr error

	// writing serializes writes: a failed batch goes back to the front of
	// the queue before the next batch is taken.
	writing sync.Mutex

	failures, dropped, written atomic.Int64

	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	// closeCtx bounds the final flush; set before stop is closed.
	closeCtx context.Context
}

// NewWriter starts a Writer on store. Close it to write what is queued.
func NewWriter(store Store, opts Options) *Writer {
	w := &Writer{
		store: store, opts: opts.withDefaults(), pending: map[string]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.run()
	return w
}

// Record queues events for writing and returns at once.
func (w *Writer) Record(events ...centralstore.AuditEvent) {
	if len(events) == 0 {
		return
	}
	w.mu.Lock()
	for _, e := range events {
		if _, ok := w.pending[e.EventID]; ok {
			continue
		}
		w.pending[e.EventID] = struct{}{}
		w.queue = append(w.queue, e)
		if w.opts.Observe != nil {
			w.opts.Observe(e)
		}
	}
	w.dropOverflow()
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// dropOverflow drops the oldest events past MaxQueue; w.mu is held.
func (w *Writer) dropOverflow() {
	over := len(w.queue) - w.opts.MaxQueue
	if over <= 0 {
		return
	}
	for _, e := range w.queue[:over] {
		delete(w.pending, e.EventID)
	}
	w.queue = slices.Delete(w.queue, 0, over)
	w.dropped.Add(int64(over))
}

// Failures is the number of failed writes so far.
func (w *Writer) Failures() int64 { return w.failures.Load() }

// Dropped is the number of events dropped unwritten because the queue was full.
func (w *Writer) Dropped() int64 { return w.dropped.Load() }

// Written is the number of events written (stored, or found stored).
func (w *Writer) Written() int64 { return w.written.Load() }

// Pending is the number of events recorded and not written yet.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// LastError is the error of the last failed write, nil when the last write
// succeeded.
func (w *Writer) LastError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// Flush writes everything queued now, batch by batch, and returns the first
// failure.
func (w *Writer) Flush(ctx context.Context) error {
	for {
		more, err := w.writeBatch(ctx)
		if err != nil || !more {
			return err
		}
	}
}

// Close stops the background writes and writes what is queued, trying until
// ctx ends. It returns an error when events are left unwritten. Events
// recorded after Close are not written.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		w.closeCtx = ctx
		close(w.stop)
	})
	select {
	case <-w.done:
	case <-ctx.Done():
	}
	if n := w.Pending(); n > 0 {
		return fmt.Errorf("audit writer closed with %d events unwritten: %w", n, errors.Join(w.LastError(), ctx.Err()))
	}
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			w.drain()
			return
		case <-w.wake:
		}
		if !w.gather() {
			w.drain()
			return
		}
		for {
			more, err := w.writeBatch(context.Background())
			if err == nil && !more {
				break
			}
			if err != nil && !w.sleep(w.opts.RetryInterval) {
				w.drain()
				return
			}
		}
	}
}

// gather waits up to Delay for a full batch; false when stopped meanwhile.
func (w *Writer) gather() bool {
	timer := time.NewTimer(w.opts.Delay)
	defer timer.Stop()
	for w.queued() < w.opts.BatchSize {
		select {
		case <-timer.C:
			return true
		case <-w.wake:
		case <-w.stop:
			return false
		}
	}
	return true
}

// sleep waits d; false when stopped meanwhile.
func (w *Writer) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-w.stop:
		return false
	}
}

// drain is the final flush after Close: it retries failed writes until the
// queue is empty or Close's context ends.
func (w *Writer) drain() {
	ctx := w.closeCtx
	for {
		more, err := w.writeBatch(ctx)
		if err == nil && !more {
			return
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(w.opts.RetryInterval):
			}
		}
	}
}

func (w *Writer) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// writeBatch writes the oldest batch; more reports whether events remain.
func (w *Writer) writeBatch(ctx context.Context) (more bool, err error) {
	w.writing.Lock()
	defer w.writing.Unlock()
	w.mu.Lock()
	batch := slices.Clone(w.queue[:min(len(w.queue), w.opts.BatchSize)])
	w.queue = w.queue[len(batch):]
	w.mu.Unlock()
	if len(batch) == 0 {
		return false, nil
	}
	wctx, cancel := context.WithTimeout(ctx, w.opts.WriteTimeout)
	_, err = w.store.InsertAuditEvents(wctx, batch)
	cancel()

	w.mu.Lock()
	defer w.mu.Unlock()
	w.lastErr = err
	if err != nil {
		w.failures.Add(1)
		w.queue = append(batch, w.queue...)
		w.dropOverflow()
		return true, err
	}
	for _, e := range batch {
		delete(w.pending, e.EventID)
	}
	w.written.Add(int64(len(batch)))
	return len(w.queue) > 0, nil
}
