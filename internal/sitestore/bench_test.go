package sitestore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/testutil"
)

// The hot path of a site: durable enqueue through the group-commit writer,
// beside the two baselines it is judged against (outpost bench prints the
// same comparison as a table): raw inserts 100 per transaction, and one
// transaction per insert. Run: go test ./internal/sitestore -run '^$' -bench .

const benchPayloadBytes = 512

func benchPayload() []byte {
	p := make([]byte, benchPayloadBytes)
	_, _ = rand.Read(p)
	return p
}

func benchMessage(i int64, payload []byte) NewMessage {
	return NewMessage{
		ID: fmt.Sprintf("bench-%012d", i), Category: contract.KindNotification, Target: "ops", Payload: payload,
		Provenance: Provenance{SiteID: "plant-1", Node: "node-a"},
	}
}

func openBench(b *testing.B) *Store {
	b.Helper()
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "site.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// runCallers runs b.N operations spread over callers goroutines.
func runCallers(b *testing.B, callers int, op func(i int64) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
}

func BenchmarkEnqueue(b *testing.B) {
	for _, callers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s, payload := openBench(b), benchPayload()
			b.ResetTimer()
			runCallers(b, callers, func(i int64) error {
				_, err := s.Enqueue(context.Background(), benchMessage(i, payload))
				return err
			})
		})
	}
}

// rawHash stands in for the 32-byte payload hash and chain links.
var rawHash = benchPayload()[:32]

// rawStmts are the buffer and job-log inserts, prepared in a transaction.
type rawStmts struct{ buffer, log *sql.Stmt }

func prepareRaw(ctx context.Context, tx *sql.Tx) (rawStmts, error) {
	buffer, err := tx.PrepareContext(ctx, insertBufferSQL)
	if err != nil {
		return rawStmts{}, err
	}
	log, err := tx.PrepareContext(ctx, insertJobLogSQL)
	return rawStmts{buffer, log}, err
}

// execRaw inserts operation i as its buffer row and its job-log entry: the
// same two rows, column for column, as Enqueue writes, with nothing around
// them.
func execRaw(ctx context.Context, stmts rawStmts, i int64, payload []byte) error {
	now := time.Now().UnixNano()
	id, ts := fmt.Sprintf("raw-%012d", i), "0000019a8f3c2b10-00000000"
	_, err := stmts.buffer.ExecContext(ctx, id, contract.KindNotification, "", "ops", payload,
		string(contract.StatusPending), now, now, "plant-1", "node-a", "", "", ts, rawHash, rawHash, rawHash, "")
	if err != nil {
		return err
	}
	_, err = stmts.log.ExecContext(ctx, "node-a", id, contract.KindNotification, ts, payload, rawHash, rawHash, rawHash, now)
	return err
}

// The writer's own cost per enqueued row: batches of 64 enqueues, as 64
// callers make them, handed to the writer by one goroutine, so the CPU per
// row (cpu-us/row, the process's) is the writer's and the SQL's, without
// the callers' or the scheduler's. Compare with RawInsertBatchesOf100.
func BenchmarkWriterBatchesOf64(b *testing.B) {
	s, payload := openBench(b), benchPayload()
	b.ResetTimer()
	start, cpu := time.Now(), testutil.ProcessCPU()
	for done := 0; done < b.N; {
		var batch []*write
		for ; len(batch) < 64 && done < b.N; done++ {
			batch = append(batch, s.enqueueWrite(context.Background(), []NewMessage{benchMessage(int64(done), payload)}, new([]Message)))
		}
		s.writer.commit(batch[0], func(_ *write, arrived func(*write)) []*write {
			for _, w := range batch {
				arrived(w)
			}
			return batch
		})
		for _, w := range batch {
			if err := <-w.done; err != nil {
				b.Fatal(err)
			}
		}
	}
	reportRows(b, start, cpu)
}

// reportRows reports rows per second and the process's CPU per row since
// start and cpu.
func reportRows(b *testing.B, start time.Time, cpu time.Duration) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
	b.ReportMetric(float64((testutil.ProcessCPU()-cpu).Nanoseconds())/1e3/float64(b.N), "cpu-us/row")
}

func BenchmarkRawInsertBatchesOf100(b *testing.B) {
	s, payload, ctx := openBench(b), benchPayload(), context.Background()
	b.ResetTimer()
	start, cpu := time.Now(), testutil.ProcessCPU()
	for done := 0; done < b.N; {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		stmts, err := prepareRaw(ctx, tx)
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < 100 && done < b.N; n, done = n+1, done+1 {
			if err := execRaw(ctx, stmts, int64(done), payload); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	reportRows(b, start, cpu)
}

func BenchmarkOneTransactionPerInsert(b *testing.B) {
	for _, callers := range []int{1, 64} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			s, payload, ctx := openBench(b), benchPayload(), context.Background()
			b.ResetTimer()
			runCallers(b, callers, func(i int64) error {
				tx, err := s.db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				stmts, err := prepareRaw(ctx, tx)
				if err != nil {
					return err
				}
				if err := execRaw(ctx, stmts, i, payload); err != nil {
					return err
				}
				return tx.Commit()
			})
		})
	}
}

// Status of a cached call on the site: one tracking row read by id.
func BenchmarkGetOperation(b *testing.B) {
	s, ctx := openBench(b), context.Background()
	const rows = 10000
	for i := 0; i < rows; i++ {
		if _, err := s.BeginOperation(ctx, NewOperation{
			OperationID: fmt.Sprintf("op-%06d", i), Kind: contract.KindExternalCall, Target: "erp/getOrder",
			Payload: []byte(`{}`), Provenance: Provenance{SiteID: "plant-1", Node: "node-a"},
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.GetOperation(ctx, fmt.Sprintf("op-%06d", i%rows)); err != nil {
			b.Fatal(err)
		}
	}
}

// The forwarder's sweep of an idle site: no row is due, and the read runs
// every poll interval.
func BenchmarkDueAfterIdle(b *testing.B) {
	s, ctx := openBench(b), context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.DueAfter(ctx, time.Now(), DueCursor{}, 100); err != nil {
			b.Fatal(err)
		}
	}
}
