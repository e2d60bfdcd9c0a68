package sitedaemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	activityheartbeat "github.com/outpost-dev/outpost/activities/heartbeat"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/redact"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// ForwarderOptions tunes the forwarder (site config).
type ForwarderOptions struct {
	// Interval is the fixed wait before a failed hand-off is tried again.
	Interval time.Duration
	// Batch is how many due rows one pass reads.
	Batch int
	// Parallelism is how many hand-offs run at once at first, and the
	// fewest while they succeed: the forwarder adapts how many it keeps in
	// flight to the round trip to central (handOffWindow).
	Parallelism int
	// MaxInFlight bounds how many hand-offs run at once however long the
	// round trip: each is a request central's frontend holds. Below
	// Parallelism (0, say) it is Parallelism: a fixed count.
	MaxInFlight int
	// PollInterval is how often to look for rows another process wrote.
	PollInterval time.Duration
	// CallTimeout bounds one hand-off call to Temporal. Default 5s.
	CallTimeout time.Duration
	// RedactFields are call params hidden, beside redact.DefaultFields, in
	// the request view a call's hand-off carries for operators.
	RedactFields []string
	// HideSubject leaves a notification's subject out of its workflow
	// summary ("Notify ops" instead of "Notify ops: Pump 3 tripped").
	HideSubject bool
	// Traces receives a span per hand-off, in the trace of the call that
	// buffered the row. Nil: no spans.
	Traces trace.TracerProvider
	// Region is the region whose central takes the hand-offs (InRegion).
	Region contract.Region
}

// Forwarder hands buffered operations to central and deletes each on
// Temporal's ack. While central is unreachable it retries every row at the
// fixed interval, forever: nothing is dropped.
type Forwarder struct {
	store    *sitestore.Store
	targets  *targets.Registry
	temporal client.Client
	opts     ForwarderOptions
	tracer   trace.Tracer
	log      *zap.Logger
	now      func() time.Time
	wake     chan struct{}
	// window is how many hand-offs run at once; it outlives sweeps, so
	// what it learnt of the link carries over.
	window   *handOffWindow
	handoffs *prometheus.CounterVec
	// starts tells how central's workers take a notification.
	starts *startCheck
	// rescheduledAt is when rows ahead of the clock were last looked for:
	// once a forward interval, not at every sweep.
	rescheduledAt time.Time
	// waiting is central's latest refusal that a later state of central
	// cures (centralNotReady); nil once a hand-off went through after it.
	waiting atomic.Pointer[centralWait]
}

// centralWait is a pass in which central refused hand-offs it can accept
// once it is set up.
type centralWait struct {
	rows   int
	reason string
	at     time.Time
}

// NewForwarder returns a forwarder over store; reg gives cached calls their
// retry policy.
func NewForwarder(store *sitestore.Store, reg *targets.Registry, tc client.Client, opts ForwarderOptions, log *zap.Logger) *Forwarder {
	if opts.CallTimeout == 0 {
		opts.CallTimeout = 5 * time.Second
	}
	return &Forwarder{
		store: store, targets: reg, temporal: tc, opts: opts, tracer: handOffTracer(opts.Traces), log: log, now: time.Now, wake: make(chan struct{}, 1),
		window: newHandOffWindow(opts.Parallelism, opts.MaxInFlight), handoffs: newHandoffCounter(),
		starts: newStartCheck(tc, opts.Region.TaskQueue(), log),
	}
}

// Wake asks for a pass now (a row was just committed).
func (f *Forwarder) Wake() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run forwards until ctx ends: each sweep hands off every due row, then the
// forwarder waits for a new row (Wake) or the poll interval. After a sweep
// that found central unreachable it waits the forward interval instead:
// new rows would only wait out the same timeout.
func (f *Forwarder) Run(ctx context.Context) error {
	poll := time.NewTicker(f.opts.PollInterval)
	defer poll.Stop()
	for {
		unreachable, err := f.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			f.log.Error("forwarder sweep failed", zap.Error(err))
		}
		if unreachable {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(f.opts.Interval):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.wake:
		case <-poll.C:
		}
	}
}

// Sweep hands off every row due now, oldest first, with as many hand-offs
// in flight as the window allows and no pause between pages of the
// backlog; it holds at most one page (Batch rows) and the rows in flight
// in memory. Acknowledged rows are settled in batches as acks arrive. The
// first "central unreachable" failure ends the sweep: rows in flight fail
// with it at once, rows not yet sent stay due.
func (f *Forwarder) Sweep(ctx context.Context) (unreachable bool, err error) {
	f.rescheduleAhead(ctx)
	sweepCtx, stop := context.WithCancel(ctx)
	defer stop()
	s := &sweep{f: f, ctx: sweepCtx, stop: stop,
		acks: make(chan sitestore.Message, f.opts.Batch), failed: map[string]string{}, refused: map[string]string{}}
	settled := make(chan error, 1)
	go func() { settled <- f.settleAcks(ctx, s.acks) }()

	readErr := s.feed()
	close(s.acks)
	settleErr := <-settled
	if s.unreachable != "" {
		f.window.forgetFloor()
	}
	if ctx.Err() == nil {
		f.recordFailures(ctx, s.failed)
		f.parkRefused(ctx, s.refused)
		f.noteCentralReadiness(s)
	}
	return s.unreachable != "", errors.Join(readErr, settleErr)
}

// noteCentralReadiness remembers why central refused hand-offs in this
// sweep, or forgets it once a hand-off went through with none refused.
func (f *Forwarder) noteCentralReadiness(s *sweep) {
	switch {
	case s.notReady > 0:
		f.waiting.Store(&centralWait{rows: s.notReady, reason: s.notReadyReason, at: f.now()})
	case s.acked:
		f.waiting.Store(nil)
	}
}

// WaitingForCentral says why hand-offs wait for central to be set up
// (missing search attributes, namespace or permission), or "" when they do
// not. A refusal older than two forward intervals is forgotten: its rows
// have been tried again since, so nothing refused them any more.
func (f *Forwarder) WaitingForCentral() string {
	w := f.waiting.Load()
	if w == nil || f.now().Sub(w.at) > 2*f.opts.Interval+f.opts.CallTimeout {
		return ""
	}
	return fmt.Sprintf("%s; %d operation(s) refused in the last pass, each tried again every %s", w.reason, w.rows, f.opts.Interval)
}

// rescheduleAhead makes due the rows a wall clock that ran ahead scheduled
// too far out: after the clock is set right they would wait as long as it
// was wrong. Nothing is legitimately scheduled further than two forward
// intervals or the longest immediate attempt, plus a minute.
func (f *Forwarder) rescheduleAhead(ctx context.Context) {
	now := f.now()
	if !f.rescheduledAt.IsZero() && now.Sub(f.rescheduledAt) >= 0 && now.Sub(f.rescheduledAt) < f.opts.Interval {
		return
	}
	f.rescheduledAt = now
	ahead := max(2*f.opts.Interval, f.targets.LongestAttempt()) + time.Minute
	n, err := f.store.RescheduleAhead(ctx, now, ahead)
	switch {
	case err != nil && ctx.Err() == nil:
		f.log.Error("reschedule rows ahead of the clock", zap.Error(err))
	case n > 0:
		f.log.Warn("buffered rows were scheduled more than the longest legitimate wait ahead of the clock: "+
			"the clock was set back (or ran ahead when they were written); they are due now",
			zap.Int("rows", n), zap.Duration("ahead", ahead))
	}
}

// sweep is one pass over the due rows.
type sweep struct {
	f    *Forwarder
	ctx  context.Context
	stop context.CancelFunc
	// acks carries the acknowledged rows to be settled.
	acks chan sitestore.Message
	// handOffs are the hand-offs in flight.
	handOffs sync.WaitGroup

	mu          sync.Mutex
	failed      map[string]string // row id → why its hand-off failed
	refused     map[string]string // row id → why central refused it for good
	unreachable string
	// notReady counts the rows central refused for a reason a later state
	// of central cures (centralNotReady); notReadyReason is one of them.
	notReady       int
	notReadyReason string
	acked          bool
}

// feed reads the due rows a page at a time and hands each off as the
// window frees a slot, until none is left or the sweep is stopped; it
// returns once every hand-off it started ended.
func (s *sweep) feed() error {
	defer s.handOffs.Wait()
	var after sitestore.DueCursor
	for s.ctx.Err() == nil {
		page, err := s.f.store.DueAfter(s.ctx, s.f.now(), after, s.f.opts.Batch)
		if err != nil || len(page) == 0 {
			return err
		}
		for _, m := range page {
			slot, err := s.f.window.acquire(s.ctx)
			if err != nil {
				return nil // the sweep was stopped
			}
			s.handOffs.Add(1)
			go func() {
				defer s.handOffs.Done()
				s.handOffRow(slot, m)
			}()
		}
		after = page[len(page)-1].Cursor()
	}
	return nil
}

// handOffRow hands off one row in its window slot and notes the outcome.
func (s *sweep) handOffRow(slot handOffSlot, m sitestore.Message) {
	started := time.Now()
	err := s.f.handOff(s.ctx, m)
	s.f.window.release(slot, time.Since(started), windowOutcome(err))
	s.f.countHandoff(m.Category, err)
	if err == nil {
		s.mu.Lock()
		s.acked = true
		s.mu.Unlock()
		s.acks <- m
		return
	}
	s.noteFailure(m.ID, err)
}

// windowOutcome is what a hand-off's error tells the window. A refusal
// about the item or central's setup says nothing of the link or of
// central's capacity, nor does central being down (Unavailable: nothing
// answers, however few are sent) or a hand-off cut short because the sweep
// stopped: shrinking on those would leave a site that waited out an outage
// trying one row per sweep. Any other failure (a timeout above all) counts
// against the window.
func windowOutcome(err error) handOffOutcome {
	var unavailable *serviceerror.Unavailable
	switch {
	case err == nil:
		return handOffAcked
	case isRefused(err) || centralNotReady(err) || errors.As(err, &unavailable) || errors.Is(err, context.Canceled):
		return handOffNoSignal
	}
	return handOffFailed
}

// noteFailure records why a row's hand-off failed. The first "central
// unreachable" failure stops the sweep, and every failure after it gets
// the same reason.
func (s *sweep) noteFailure(id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.unreachable != "":
		s.failed[id] = s.unreachable
	case isUnreachable(err):
		s.unreachable = fmt.Sprintf("central unreachable (no ack within %s): %v", s.f.opts.CallTimeout, err)
		s.failed[id] = s.unreachable
		s.stop()
	case isRefused(err):
		s.refused[id] = err.Error()
	case centralNotReady(err):
		s.notReady++
		s.failed[id] = notReadyReason(err)
		s.notReadyReason = s.failed[id]
	default:
		s.failed[id] = err.Error()
	}
}

// settleWait is how long the first ack of a settle batch waits for company.
// A row settled late is only handed off again after a crash, and central
// ignores that duplicate; a commit per ack would cost the writer dearly.
const settleWait = 50 * time.Millisecond

// settleAcks settles acknowledged rows in batches: up to Batch rows, or what
// arrived within settleWait of the first. It keeps taking acks after a
// failure (unsettled rows are handed off again later: central ignores a
// duplicate submit) and returns the first error.
func (f *Forwarder) settleAcks(ctx context.Context, acks <-chan sitestore.Message) error {
	var firstErr error
	for m := range acks {
		if err := f.settle(ctx, f.gatherAcks(m, acks)); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// gatherAcks adds to first the acks that arrive within settleWait, up to Batch.
func (f *Forwarder) gatherAcks(first sitestore.Message, acks <-chan sitestore.Message) []sitestore.Message {
	batch := []sitestore.Message{first}
	timeout := time.NewTimer(settleWait)
	defer timeout.Stop()
	for len(batch) < f.opts.Batch {
		select {
		case m, ok := <-acks:
			if !ok {
				return batch
			}
			batch = append(batch, m)
		case <-timeout.C:
			return batch
		}
	}
	return batch
}

// settle deletes acknowledged notifications (central owns them now) and
// marks acknowledged cached calls handed off (the site still delivers them).
func (f *Forwarder) settle(ctx context.Context, acked []sitestore.Message) error {
	var notifications, calls []string
	for _, m := range acked {
		if m.Category == contract.KindNotification {
			notifications = append(notifications, m.ID)
		} else {
			calls = append(calls, m.ID)
		}
	}
	if len(notifications) > 0 {
		if err := f.store.Delete(ctx, notifications...); err != nil {
			return err
		}
	}
	if len(calls) > 0 {
		return f.store.MarkHandedOff(ctx, calls...)
	}
	return nil
}

func (f *Forwarder) countHandoff(category string, err error) {
	outcome := handoffAcked
	switch {
	case isRefused(err):
		outcome = handoffRefused
	case centralNotReady(err):
		outcome = handoffWaiting
	case err != nil:
		outcome = handoffFailed
	}
	f.handoffs.WithLabelValues(category, outcome).Inc()
}

func isUnreachable(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.As(err, &unavailable) || errors.As(err, &deadline) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// errUnreadable is a buffered row the forwarder cannot read: no retry can
// hand it off.
var errUnreadable = errors.New("buffered row cannot be read")

// isRefused reports a hand-off that can never succeed because of the item
// itself: the row cannot be read, or Temporal refused it as over one of its
// size or length limits (payload, memo, workflow id, a search attribute's
// value). Every other refusal may be cured by central (centralNotReady).
func isRefused(err error) bool {
	var invalid *serviceerror.InvalidArgument
	if errors.Is(err, errUnreadable) {
		return true
	}
	if !errors.As(err, &invalid) {
		return false
	}
	msg := strings.ToLower(invalid.Error())
	return strings.Contains(msg, "exceeds") || strings.Contains(msg, "too long") || strings.Contains(msg, "too large")
}

// centralNotReady reports a refusal that a later state of central cures:
// Outpost's search attributes not registered yet (no `outpost central` has
// run on the namespace), the namespace missing, the site's credentials not
// allowed yet, or any other invalid-request answer that is not about the
// item. Such rows are retried at the forward interval, like an unreachable
// central, never parked: parking them stranded work until someone noticed.
func centralNotReady(err error) bool {
	var invalid *serviceerror.InvalidArgument
	var noNamespace *serviceerror.NamespaceNotFound
	var denied *serviceerror.PermissionDenied
	var precondition *serviceerror.FailedPrecondition
	return (errors.As(err, &invalid) && !isRefused(err)) || errors.As(err, &noNamespace) ||
		errors.As(err, &denied) || errors.As(err, &precondition)
}

// notReadyReason says why central refused a hand-off it can accept later,
// and what cures it.
func notReadyReason(err error) string {
	var noNamespace *serviceerror.NamespaceNotFound
	var denied *serviceerror.PermissionDenied
	msg := err.Error()
	switch {
	case strings.Contains(msg, "search attribute"):
		return "central refused the hand-off: " + msg + " (Outpost's search attributes are not registered in the namespace: " +
			"start `outpost central` once, which registers them; the site retries on its own)"
	case errors.As(err, &noNamespace):
		return "central refused the hand-off: " + msg + " (create the namespace named by temporal.namespace, " +
			"or fix the name; the site retries on its own)"
	case errors.As(err, &denied):
		return "central refused the hand-off: " + msg + " (the site's Temporal credentials may not start workflows " +
			"in this namespace: grant them; the site retries on its own)"
	}
	return "central refused the hand-off: " + msg + " (the site retries on its own)"
}

// parkRefused parks on the site the rows central refused for good, so they
// are reported (status API, Parked in the buffer, handoffs_total{outcome=
// "refused"}, an error in the log) instead of retried silently forever.
func (f *Forwarder) parkRefused(ctx context.Context, refused map[string]string) {
	for id, reason := range refused {
		if err := f.store.ParkUnforwardable(ctx, id, f.now(), "central refused it for good, so it stays on the site: "+reason); err != nil {
			f.log.Error("park refused hand-off", zap.String("id", id), zap.Error(err))
			continue
		}
		f.log.Error("central refused a buffered operation for good; parked on the site", zap.String("id", id), zap.String("reason", reason))
	}
}

// recordFailures schedules each failed row's next hand-off a forward interval on.
func (f *Forwarder) recordFailures(ctx context.Context, failed map[string]string) {
	if len(failed) == 0 {
		return
	}
	at := f.now()
	for id, reason := range failed {
		if err := f.store.RecordFailedAttempt(ctx, id, at, at.Add(f.opts.Interval), reason); err != nil {
			f.log.Error("record failed hand-off", zap.String("id", id), zap.Error(err))
		}
	}
	f.log.Warn("hand-offs to central failed; will retry", zap.Int("rows", len(failed)),
		zap.Duration("retryIn", f.opts.Interval), zap.String("firstReason", firstValue(failed)))
}

func firstValue(m map[string]string) string {
	for _, v := range m {
		return v
	}
	return ""
}

// handOff submits one row: starts its workflow. An "already started"
// answer means central has it (running, or finished before): that counts
// as an ack.
func (f *Forwarder) handOff(ctx context.Context, m sitestore.Message) error {
	var start func(context.Context) error
	switch m.Category {
	case contract.KindNotification:
		var sub contract.NotificationSubmission
		if err := json.Unmarshal(m.Payload, &sub); err != nil {
			return fmt.Errorf("decode buffered notification %s: %w: %w", m.ID, errUnreadable, err)
		}
		start = func(ctx context.Context) error { return f.handOffNotification(ctx, sub) }
	case contract.KindExternalCall, contract.KindDatabaseWrite:
		sub, err := f.callSubmission(ctx, m)
		if err != nil {
			return err
		}
		start = func(ctx context.Context) error { return f.handOffCall(ctx, sub) }
	default:
		return fmt.Errorf("buffered %s %s: no forwarder for this category", m.Category, m.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.CallTimeout)
	defer cancel()
	// The start continues the trace of the call that buffered the row,
	// however long ago: the client's interceptor carries it on into the
	// workflow's header.
	ctx, span := f.tracer.Start(continueTrace(ctx, m.TraceParent), "hand-off "+m.Category, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(attrOperationID, m.ID)))
	defer span.End()
	err := start(ctx)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// handOffNotification starts the notification's workflow with the
// submission as its input while every central worker knows that start
// (startCheck): one billed action less than a signal. Otherwise it signals
// the submission with the start (SignalWithStart of NotificationWorkflow),
// as sites before did. Started while it runs, the workflow answers with
// the running one (an ack, as a duplicate signal was).
func (f *Forwarder) handOffNotification(ctx context.Context, sub contract.NotificationSubmission) error {
	return f.startOrSignal(ctx, InRegion(NotificationStartOptions(sub, f.opts.HideSubject), f.opts.Region), f.starts.startsNotifications(ctx),
		contract.WorkflowNotificationStarted, contract.WorkflowNotification, sub)
}

// handOffCall starts the cached call's workflow with the submission as its
// input while every central worker knows that start (startCheck), and
// otherwise signals the submission with the start, as handOffNotification.
func (f *Forwarder) handOffCall(ctx context.Context, sub contract.CachedCallSubmission) error {
	return f.startOrSignal(ctx, InRegion(CachedCallStartOptions(sub), f.opts.Region), f.starts.startsCalls(ctx),
		contract.WorkflowCachedCallStarted, contract.WorkflowCachedCall, sub)
}

// startOrSignal starts workflow started with sub as its input when
// withInput, and otherwise workflow signalled with sub in its submit
// signal (SignalWithStart).
func (f *Forwarder) startOrSignal(ctx context.Context, opts client.StartWorkflowOptions, withInput bool,
	started, signalled string, sub any) error {
	if withInput {
		_, err := f.temporal.ExecuteWorkflow(ctx, opts, started, sub)
		return err
	}
	_, err := f.temporal.SignalWithStartWorkflow(ctx, opts.ID, contract.SignalSubmit, sub, opts, signalled)
	return err
}

// callSubmission describes a buffered cached call to central: its tracking
// row and the retry policy of its definition, with the heartbeat timeout
// this daemon's attempts keep (its worker heartbeats them), which the
// workflow schedules them with.
func (f *Forwarder) callSubmission(ctx context.Context, m sitestore.Message) (contract.CachedCallSubmission, error) {
	row, err := f.store.GetOperation(ctx, m.TrackedOperationID)
	if err != nil {
		return contract.CachedCallSubmission{}, err
	}
	req, err := targets.Decode(m.Payload)
	if err != nil {
		return contract.CachedCallSubmission{}, fmt.Errorf("decode buffered call %s: %w", m.ID, err)
	}
	policy := f.targets.Policy(req)
	policy.HeartbeatTimeout = activityheartbeat.Timeout
	return contract.CachedCallSubmission{
		OperationID: row.OperationID, Kind: row.Kind, Target: row.Target, SiteID: row.SourceSiteID,
		Policy: policy, LastAttemptAt: row.LastAttemptAt, NextAttemptAt: row.NextAttemptAt,
		LastError: row.LastError, CreatedAt: row.CreatedAt, Request: redact.RequestView(req, f.opts.RedactFields),
		RetryCount: row.RetryCount, Status: row.Status,
	}, nil
}

// NotificationStartOptions starts a notification's workflow: search
// attributes for the Web UI, a readable summary (without the subject when
// hideSubject: whoever opens the Web UI reads summaries, and without payload
// encryption in plain text), and a closed workflow never restarted by a late
// resubmit.
func NotificationStartOptions(sub contract.NotificationSubmission, hideSubject bool) client.StartWorkflowOptions {
	summary := "Notify " + sub.ListName
	if !hideSubject {
		summary += ": " + sub.Subject
	}
	return client.StartWorkflowOptions{
		ID:                    contract.NotificationWorkflowID(sub.NotificationID),
		TaskQueue:             contract.CentralTaskQueue,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:         contract.Summary(summary),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporalcontract.AttrKind.ValueSet(contract.KindNotification),
			temporalcontract.AttrSite.ValueSet(sub.SourceSiteID),
			temporalcontract.AttrTarget.ValueSet(sub.ListName),
			temporalcontract.AttrStatus.ValueSet(string(contract.StatusPending)),
		),
	}
}

// CachedCallStartOptions starts a cached call's workflow: search attributes
// for the Web UI (Parked at once for a call the site parked while central
// was away), a readable summary, and never a restart of a closed one.
func CachedCallStartOptions(sub contract.CachedCallSubmission) client.StartWorkflowOptions {
	status := contract.StatusPending
	if sub.Status == contract.StatusParked {
		status = contract.StatusParked
	}
	verb := "Call"
	if sub.Kind == contract.KindDatabaseWrite {
		verb = "Write to"
	}
	return client.StartWorkflowOptions{
		ID:                    contract.CachedCallWorkflowID(sub.OperationID),
		TaskQueue:             contract.CentralTaskQueue,
		WorkflowIDReusePolicy: enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		StaticSummary:         contract.Summary(fmt.Sprintf("%s %s from %s", verb, sub.Target, sub.SiteID)),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			temporalcontract.AttrKind.ValueSet(sub.Kind),
			temporalcontract.AttrSite.ValueSet(sub.SiteID),
			temporalcontract.AttrTarget.ValueSet(sub.Target),
			temporalcontract.AttrStatus.ValueSet(string(status)),
		),
	}
}

// InRegion hands a start to region's central: its task queue, and
// OutpostRegion among the search attributes, which its workers check
// before they run the workflow. The zero Region leaves opts as they are.
func InRegion(opts client.StartWorkflowOptions, region contract.Region) client.StartWorkflowOptions {
	if region.Name == "" {
		return opts
	}
	opts.TaskQueue = region.TaskQueue()
	opts.TypedSearchAttributes = temporal.NewSearchAttributes(
		opts.TypedSearchAttributes.Copy(), temporalcontract.AttrRegion.ValueSet(region.Name))
	return opts
}
