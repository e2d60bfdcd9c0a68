package sitedaemon

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// sentBatch is one send the telemetry sender made.
type sentBatch struct {
	at     time.Time
	seqs   []int64
	bytes  int // the batch's JSON
	failed bool
}

// centralRecorder stands in for central's ingest: it records every batch,
// takes latency to answer, and refuses batches while failing is set.
type centralRecorder struct {
	latency time.Duration
	failing atomic.Bool
	mu      sync.Mutex
	sent    []sentBatch
}

func (c *centralRecorder) send(ctx context.Context, batch contract.TelemetryBatch) error {
	encoded, err := json.Marshal(batch)
	if err != nil {
		return err
	}
	b := sentBatch{at: time.Now(), bytes: len(encoded), failed: c.failing.Load()}
	for _, row := range batch.Rows {
		b.seqs = append(b.seqs, row.Seq)
	}
	time.Sleep(c.latency)
	c.mu.Lock()
	c.sent = append(c.sent, b)
	c.mu.Unlock()
	if b.failed {
		return errors.New("central unreachable")
	}
	return nil
}

func (c *centralRecorder) batches() []sentBatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sentBatch(nil), c.sent...)
}

// persistedSeqs is every change central accepted, in the order it got them.
func (c *centralRecorder) persistedSeqs() []int64 {
	var out []int64
	for _, b := range c.batches() {
		if !b.failed {
			out = append(out, b.seqs...)
		}
	}
	return out
}

// runTelemetry runs a sender over a fresh site store until the test ends.
func runTelemetry(t *testing.T, batch int, delay time.Duration, central *centralRecorder) (*Telemetry, *sitestore.Store) {
	t.Helper()
	store, err := sitestore.Open(context.Background(), filepath.Join(t.TempDir(), "site.db"), sitestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	tel := NewTelemetry(store, nil, TelemetryOptions{SiteID: "plant-1", Batch: batch, Delay: delay}, zaptest.NewLogger(t))
	tel.send = central.send
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tel.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return tel, store
}

// trackChanges begins n cached calls: n tracking changes.
func trackChanges(t *testing.T, store *sitestore.Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		_, err := store.BeginOperation(context.Background(), sitestore.NewOperation{
			OperationID: fmt.Sprintf("op-%d-%d", time.Now().UnixNano(), i), Kind: contract.KindExternalCall,
			Target: "erp.getOrder", Payload: []byte(`{}`), Provenance: sitestore.Provenance{SiteID: "plant-1"},
		})
		require.NoError(t, err)
	}
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func cursorOf(t *testing.T, store *sitestore.Store) int64 {
	t.Helper()
	cursor, err := store.TelemetryCursor(context.Background())
	require.NoError(t, err)
	return cursor
}

// A full batch goes at once, long before Delay.
func TestTelemetrySendsAFullBatchAtOnce(t *testing.T) {
	t.Parallel()
	central := &centralRecorder{}
	tel, store := runTelemetry(t, 5, time.Hour, central)

	trackChanges(t, store, 5)
	require.Eventually(t, func() bool { return tel.Batches() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, []int64{1, 2, 3, 4, 5}, central.persistedSeqs())
	require.Equal(t, int64(1), tel.Attempts())
	require.Equal(t, int64(5), cursorOf(t, store), "a counted batch is one the cursor moved past")
}

// A batch counts once the cursor moved past it, so whoever waits for the
// count (the fleet bench) finds every cursor where it should be. The site
// store's write lock is taken as central answers, so the cursor's move
// waits for it, and the count must wait too.
func TestTelemetryCountsABatchOnceTheCursorMoved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "site.db")
	store, err := sitestore.Open(ctx, path, sitestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	locker, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { locker.Close() })

	var lock *sql.Tx
	locked := make(chan struct{})
	tel := NewTelemetry(store, nil, TelemetryOptions{SiteID: "plant-1", Batch: 5, Delay: time.Hour}, zaptest.NewLogger(t))
	tel.send = func(ctx context.Context, batch contract.TelemetryBatch) error {
		if lock == nil { // the first send only
			tx, err := locker.BeginTx(ctx, nil) // IMMEDIATE: the write lock
			if err != nil {
				t.Errorf("take the site store's write lock: %v", err)
				return err
			}
			lock = tx
			close(locked)
		}
		return nil
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tel.Run(runCtx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	trackChanges(t, store, 5)
	select {
	case <-locked:
	case <-time.After(5 * time.Second):
		t.Fatal("the batch was never sent")
	}
	time.Sleep(200 * time.Millisecond)
	require.Zero(t, tel.Batches(), "not counted while the cursor's move waits for the lock")
	require.Zero(t, cursorOf(t, store))
	require.NoError(t, lock.Rollback())
	require.Eventually(t, func() bool { return tel.Batches() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, int64(5), cursorOf(t, store))
}

// Fewer changes than a batch wait Delay from when the sender saw them, then
// go together.
func TestTelemetrySendsAPartialBatchAfterDelay(t *testing.T) {
	t.Parallel()
	const delay = 300 * time.Millisecond
	central := &centralRecorder{}
	tel, store := runTelemetry(t, 5, delay, central)

	before := time.Now()
	trackChanges(t, store, 3)
	require.Eventually(t, func() bool { return tel.Batches() == 1 }, 5*time.Second, 10*time.Millisecond)
	sent := central.batches()
	require.Len(t, sent, 1)
	require.Equal(t, []int64{1, 2, 3}, sent[0].seqs)
	require.GreaterOrEqual(t, sent[0].at.Sub(before), delay, "not sent before Delay")
}

// A failed send keeps the cursor; the same changes go again after Delay,
// not at once although they fill a batch.
func TestTelemetryResendsAfterAFailedIngest(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	central := &centralRecorder{}
	central.failing.Store(true)
	tel, store := runTelemetry(t, 5, delay, central)

	trackChanges(t, store, 5)
	require.Eventually(t, func() bool { return tel.Attempts() >= 2 }, 5*time.Second, 10*time.Millisecond)
	require.Zero(t, cursorOf(t, store), "a failed send keeps the cursor")
	require.Zero(t, tel.Batches())
	central.failing.Store(false)
	require.Eventually(t, func() bool { return tel.Batches() == 1 }, 5*time.Second, 10*time.Millisecond)

	sent := central.batches()
	require.Equal(t, int64(len(sent)), tel.Attempts())
	for i, b := range sent {
		require.Equal(t, []int64{1, 2, 3, 4, 5}, b.seqs, "send %d", i)
		if i > 0 {
			require.GreaterOrEqual(t, b.at.Sub(sent[i-1].at), delay, "send %d waits Delay after a failure", i)
		}
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5}, central.persistedSeqs())
	require.Eventually(t, func() bool { return cursorOf(t, store) == 5 }, 5*time.Second, 10*time.Millisecond)
}

// A burst travels in full batches, plus at most one partial one: changes
// that arrive during a send wait for their batch to fill instead of going
// straight after it. Every change arrives once, in change order.
func TestTelemetrySendsABurstInFullBatches(t *testing.T) {
	t.Parallel()
	const batch, k = 20, 10*20 + 3
	central := &centralRecorder{latency: 3 * time.Millisecond}
	tel, store := runTelemetry(t, batch, time.Second, central)

	// At most one change a millisecond: a few arrive during each send, far
	// fewer than a batch, however fast this machine commits.
	for i := 0; i < k; i++ {
		trackChanges(t, store, 1)
		time.Sleep(time.Millisecond)
	}
	require.Eventually(t, func() bool { return len(central.persistedSeqs()) >= k }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, seqRange(1, k), central.persistedSeqs())
	sent := central.batches()
	for i, b := range sent {
		require.LessOrEqual(t, len(b.seqs), batch, "send %d", i)
	}
	t.Logf("%d changes in %d round trips", k, len(sent))
	require.LessOrEqual(t, len(sent), (k+batch-1)/batch+1)
	require.Equal(t, int64(len(sent)), tel.Attempts())
	// Counted after the cursor's move, which follows the last send.
	require.Eventually(t, func() bool { return tel.Batches() == int64(len(sent)) }, 5*time.Second, 10*time.Millisecond,
		"every send's round trip is counted")
}

// Changes with long last errors go in batches Temporal accepts: the JSON
// of each stays within contract.TelemetryMaxBytes, however many rows the batch
// setting allows, and what a cut batch leaves goes at once, not after
// Delay: every change arrives, in order.
func TestTelemetryKeepsEachBatchWithinTheBlobLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const calls = 150
	central := &centralRecorder{}
	tel, store := runTelemetry(t, 2*calls, time.Hour, central)
	longError := strings.Repeat("<", 2000) // six bytes each in JSON
	for i := range calls {
		id := fmt.Sprintf("op-%d", i)
		_, err := store.BeginOperation(ctx, sitestore.NewOperation{OperationID: id, Kind: contract.KindExternalCall,
			Target: "erp.getOrder", Payload: []byte(`{}`), Provenance: sitestore.Provenance{SiteID: "plant-1"}})
		require.NoError(t, err)
		at := time.Now()
		_, err = store.RecordAttempt(ctx, sitestore.Attempt{OperationID: id, Status: contract.StatusParked, RetryCount: 3, LastError: longError, At: &at})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return len(central.persistedSeqs()) >= 2*calls }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, seqRange(1, 2*calls), central.persistedSeqs())
	sent := central.batches()
	for i, b := range sent {
		require.LessOrEqual(t, b.bytes, contract.TelemetryMaxBytes, "send %d of %d rows", i, len(b.seqs))
	}
	require.Greater(t, len(sent), 1, "%d changes of about 12 KB each do not fit one batch", 2*calls)
	require.Eventually(t, func() bool { return tel.Batches() == int64(len(sent)) }, 5*time.Second, 10*time.Millisecond,
		"every send's round trip is counted")
}

// While no central worker answers, a site's retries ask about the batch it
// signalled instead of signalling it again: the ingest workflow's history
// holds it once, however long central is away.
func TestIngestSenderSignalsABatchOnceWhileCentralIsAway(t *testing.T) {
	t.Parallel()
	srv := startDevServer(t)
	tc := srv.Client()
	sender := NewIngestSender(tc, contract.Region{})
	batch := contract.TelemetryBatch{SiteID: "plant-1", Rows: []contract.TrackedOperation{{
		OperationID: "op-1", Kind: contract.KindExternalCall, Status: contract.StatusDelivered, SourceSiteID: "plant-1", Seq: 7,
	}}}
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := sender.Send(ctx, batch, true)
		cancel()
		require.Error(t, err, "no central worker wrote the batch")
	}
	signals := 0
	iter := tc.GetWorkflowHistory(context.Background(), contract.TelemetryIngestWorkflowID("plant-1"), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		if ev.GetEventType() == enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED {
			signals++
		}
	}
	require.Equal(t, 1, signals, "the batch signalled once")
}

// A batch goes compressed only when the sender is told central's workers
// take it so (contract.GenerationCompressedTelemetry): a worker of an
// earlier generation cannot decode it. Either way central reads the same
// batch back.
func TestIngestSenderCompressesOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	srv := startDevServer(t)
	tc := srv.Client()
	for _, compress := range []bool{true, false} {
		site := fmt.Sprintf("plant-compress-%t", compress)
		batch := contract.TelemetryBatch{SiteID: site, Rows: []contract.TrackedOperation{{
			OperationID: "op-1", Kind: contract.KindExternalCall, Target: "erp.createOrder", Status: contract.StatusDelivered,
			SourceSiteID: site, Seq: 7, LastError: strings.Repeat("connection refused; ", 100),
		}}}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := NewIngestSender(tc, contract.Region{}).Send(ctx, batch, compress)
		cancel()
		require.Error(t, err, "no central worker wrote the batch")

		payload := signalledPayload(t, tc, contract.TelemetryIngestWorkflowID(site))
		encoding := string(payload.GetMetadata()[converter.MetadataEncoding])
		plain, err := json.Marshal(batch)
		require.NoError(t, err)
		if compress {
			require.Equal(t, temporalcontract.EncodingGzipJSON, encoding)
			require.Less(t, len(payload.GetData()), len(plain)/4, "a compressed batch is smaller than its JSON")
		} else {
			require.Equal(t, converter.MetadataEncodingJSON, encoding, "a worker before compression reads it")
		}
		got, err := temporalcontract.DecodeTelemetryBatch(payload)
		require.NoError(t, err)
		require.Equal(t, batch, got)
	}
}

// signalledPayload is the payload of the first signal in workflow id's history.
func signalledPayload(t *testing.T, tc client.Client, id string) *commonpb.Payload {
	t.Helper()
	iter := tc.GetWorkflowHistory(context.Background(), id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		ev, err := iter.Next()
		require.NoError(t, err)
		if signal := ev.GetWorkflowExecutionSignaledEventAttributes(); signal != nil {
			return signal.GetInput().GetPayloads()[0]
		}
	}
	t.Fatalf("%s has no signal", id)
	return nil
}

// A sender asks whether its batch is written about when central took to
// write its last one, not every few milliseconds from the signal on: a
// busy central asked by every site spent half its time answering. Before
// it knows how long a write takes, it asks at once and then ever less often.
func TestIngestSenderAsksWhenItsBatchShouldBeWritten(t *testing.T) {
	t.Parallel()
	askedBy := func(q *querySchedule, until time.Duration) (asked int, first time.Duration) {
		var at time.Duration
		for {
			at += q.wait()
			if at > until {
				return asked, first
			}
			if asked++; asked == 1 {
				first = at
			}
		}
	}
	asked, first := askedBy(newQuerySchedule(2*time.Second), 2200*time.Millisecond)
	require.Equal(t, 1500*time.Millisecond, first, "first asked at three quarters of the last write's time")
	require.LessOrEqual(t, asked, 3, "asked %d times in the 2.2 s a write like the last one takes", asked)
	require.Greater(t, asked, 1, "asked again soon after the time the last write took")

	asked, first = askedBy(newQuerySchedule(0), 2200*time.Millisecond)
	require.Zero(t, first, "with no write timed yet, asked at once")
	require.LessOrEqual(t, asked, 10, "asked %d times in 2.2 s", asked)

	slow := newQuerySchedule(time.Hour)
	require.Equal(t, maxFirstQueryWait, slow.wait(), "after a slow write, asked first within maxFirstQueryWait: the next batch waits for the answer")
	require.Equal(t, maxQueryStep, slow.wait(), "after a slow write, asked again within maxQueryStep")
}

// A question that goes unanswered does not hold the batch for the whole
// send: the sender asks again, and the ingest workflow, idle by then,
// answers. On the cluster bench a site waited out its 30 s for a batch
// written a second after its signal, and a cluster node reset a query
// stream it gave up on. A question refused for good fails the send.
func TestIngestSenderAsksAgainWhenAQuestionGoesUnanswered(t *testing.T) {
	t.Parallel()
	srv := startDevServer(t)
	w := worker.New(srv.Client(), contract.CentralTaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(lastSeqIngest, workflow.RegisterOptions{Name: contract.WorkflowTelemetryIngest})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	for _, tc := range []struct {
		name  string
		first func(ctx context.Context) error
		sent  bool
	}{
		{"lost until the question's timeout", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, true},
		{"stream reset by the server", func(context.Context) error { return serviceerror.NewCanceled("stream terminated by RST_STREAM") }, true},
		{"refused", func(context.Context) error { return serviceerror.NewInvalidArgument("no such query") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost := &failFirstQuery{first: tc.first}
			c, err := client.Dial(client.Options{HostPort: srv.FrontendHostPort(), Interceptors: []interceptor.ClientInterceptor{lost}})
			require.NoError(t, err)
			defer c.Close()
			site := "plant-" + strings.ReplaceAll(tc.name, " ", "-")
			batch := contract.TelemetryBatch{SiteID: site, Rows: []contract.TrackedOperation{{
				OperationID: "op-" + site, Kind: contract.KindExternalCall, Status: contract.StatusDelivered, SourceSiteID: site, Seq: 7,
			}}}
			start := time.Now()
			err = NewIngestSender(c, contract.Region{}).Send(context.Background(), batch, false) // lastSeqIngest reads plain batches
			if !tc.sent {
				require.ErrorContains(t, err, "no such query")
				return
			}
			require.NoError(t, err)
			require.Less(t, time.Since(start), 25*time.Second, "confirmed by the question asked after the lost one")
			require.GreaterOrEqual(t, lost.asked.Load(), int32(2), "asked again after the first question went unanswered")
		})
	}
}

// lastSeqIngest stands in for central's ingest workflow: it answers
// QueryTelemetryWritten with the last change of each site signalled.
func lastSeqIngest(ctx workflow.Context) error {
	written := map[string]int64{}
	if err := workflow.SetQueryHandler(ctx, contract.QueryTelemetryWritten, func(site string) (int64, error) {
		return written[site], nil
	}); err != nil {
		return err
	}
	batches := workflow.GetSignalChannel(ctx, contract.SignalTelemetryBatch)
	for {
		var b contract.TelemetryBatch
		batches.Receive(ctx, &b)
		written[b.SiteID] = b.Rows[len(b.Rows)-1].Seq
	}
}

// failFirstQuery is a client whose first query fails with first's error.
type failFirstQuery struct {
	interceptor.ClientInterceptorBase
	first func(ctx context.Context) error
	asked atomic.Int32
}

func (f *failFirstQuery) InterceptClient(next interceptor.ClientOutboundInterceptor) interceptor.ClientOutboundInterceptor {
	return &failFirstQueryOutbound{ClientOutboundInterceptorBase: interceptor.ClientOutboundInterceptorBase{Next: next}, f: f}
}

type failFirstQueryOutbound struct {
	interceptor.ClientOutboundInterceptorBase
	f *failFirstQuery
}

func (o *failFirstQueryOutbound) QueryWorkflow(ctx context.Context, in *interceptor.ClientQueryWorkflowInput) (converter.EncodedValue, error) {
	if o.f.asked.Add(1) == 1 {
		return nil, o.f.first(ctx)
	}
	return o.Next.QueryWorkflow(ctx, in)
}
