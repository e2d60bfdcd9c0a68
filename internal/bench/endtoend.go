package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/demosystem"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/notification"
	"github.com/outpost-dev/outpost/site"
	"github.com/outpost-dev/outpost/workers"
	"github.com/outpost-dev/outpost/workflows/operation"
)

// endToEnd measures notifications delivered per second through the whole
// system: the site (its daemon in this process: the SDK client behind the
// API, which wakes the forwarder) to central's worker (NotificationWorkflow:
// central row, SMTP send, audit) to an SMTP sink in this process, from the
// first Notify until the sink has every email. The baseline is BareWorkflow
// (one activity sending the same email with the same mailer to the same
// recipients) on its own task queue of the same server, started as many
// times from the same parallelism, until the sink has every email; beside
// it, BareLocalWorkflow, whose one attempt is a local activity as a
// notification's first attempt is, and BareLocalLikeNotificationWorkflow,
// that with a notification's start options and payloads. All run in
// alternating rounds (e2eRounds).
func (r *run) endToEnd(ctx context.Context) (rows []Row, err error) {
	srv, err := r.startTemporal(ctx, SectionEndToEnd)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, srv.stop()) }()
	sink, err := smtpsink.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer sink.Close()
	box := newMailbox(sink)
	e, err := r.startEndToEnd(ctx, srv.client(), sink.Port())
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, e.stop()) }()
	serverPID, err := srv.pid()
	if err != nil {
		return nil, fmt.Errorf("find the dev server's process: %w", err)
	}
	return r.timeEndToEnd(ctx, e, box, serverPID)
}

// e2eRounds is how many timed rounds each side of the end-to-end
// comparison runs, in the order site, bare, bare, site, site, bare…: drift
// weighs on both sides alike, and a burst of load from elsewhere on the
// machine lands on one round of one side, where the details show it.
const e2eRounds = 4

func (r *run) timeEndToEnd(ctx context.Context, e *endToEnd, box *mailbox, serverPID int) ([]Row, error) {
	n, p := r.opts.EndToEnd, r.opts.Parallelism
	warm := min(50, n/10+1)
	r.step("e2e: warm-up, %d through the site and %d of each bare workflow, untimed", warm, warm)
	if _, err := box.time(ctx, warm, e.throughSite(warm)); err != nil {
		return nil, fmt.Errorf("warm-up through the site: %w", err)
	}
	if _, err := box.time(ctx, warm, e.bare(warm, BareWorkflow)); err != nil {
		return nil, fmt.Errorf("warm-up of the bare workflow: %w", err)
	}
	if _, err := box.time(ctx, warm, e.bare(warm, BareLocalWorkflow)); err != nil {
		return nil, fmt.Errorf("warm-up of the bare workflow with a local activity: %w", err)
	}
	if _, err := box.time(ctx, warm, e.bareLikeNotification(warm)); err != nil {
		return nil, fmt.Errorf("warm-up of the bare workflow started like a notification: %w", err)
	}
	if r.opts.EndToEndAlone != "" {
		return r.timeAlone(ctx, e, box, serverPID)
	}
	r.step("e2e: %s notifications through site SDK, forwarder, central worker and SMTP, %s bare workflows, %s with a local activity and %s of those started like a notification, in %d alternating rounds each",
		thousands(int64(n)), thousands(int64(n)), thousands(int64(n)), thousands(int64(n)), e2eRounds)
	// The CPU each side costs the dev server and this process (site,
	// central worker, bare worker, SMTP sink): where a gap between the
	// sides comes from.
	cpu := [4][]*cpuOf{}
	for i := range cpu {
		cpu[i] = []*cpuOf{{pid: serverPID}, {pid: os.Getpid()}}
	}
	side := func(i int, send func(k int) func(context.Context) error) func(round int) (time.Duration, error) {
		return func(round int) (time.Duration, error) {
			k := share(n, e2eRounds, round)
			return withCPU(cpu[i], func() (time.Duration, error) { return box.time(ctx, k, send(k)) })
		}
	}
	times, err := alternate(e2eRounds, side(0, e.throughSite),
		side(1, func(k int) func(context.Context) error { return e.bare(k, BareWorkflow) }),
		side(2, func(k int) func(context.Context) error { return e.bare(k, BareLocalWorkflow) }),
		side(3, e.bareLikeNotification))
	if err != nil {
		return nil, err
	}
	notified, bare, bareLocal, likeNotification := times[0], times[1], times[2], times[3]
	row := compare(SectionEndToEnd, "end to end, delivered (site to SMTP)", perSecond(n, notified.total()), "/s",
		Figure{Name: fmt.Sprintf("bare workflow + 1 activity, %d in flight", p), Value: perSecond(n, bare.total()), Unit: "/s"})
	row = row.atLeastRatio(0.9).withDetail("%s notifications in %.1f s (rounds %s); bare: %.1f s (rounds %s); "+
		"the dev server's CPU: %.1f ms a notification, %.1f ms a bare workflow; this process's: %.1f ms and %.1f ms; %s",
		thousands(int64(n)), notified.total().Seconds(), notified, bare.total().Seconds(), bare,
		perItemMS(cpu[0][0].total, n), perItemMS(cpu[1][0].total, n),
		perItemMS(cpu[0][1].total, n), perItemMS(cpu[1][1].total, n), box.duplicates())
	// What the site path's own work costs beside the same Temporal work (a
	// notification's first attempt is a local activity): at most 5%.
	sameShape := compare(SectionEndToEnd, "end to end, against the same Temporal work", perSecond(n, notified.total()), "/s",
		Figure{Name: fmt.Sprintf("bare workflow + 1 local activity, %d in flight", p), Value: perSecond(n, bareLocal.total()), Unit: "/s"})
	sameShape = sameShape.atLeastRatio(0.95).withDetail("what the site store, the forwarder, the central row with its audit events and the search attributes "+
		"cost beside one delivery's Temporal work: bare with a local activity %.1f s (rounds %s); the dev server's CPU %.1f ms "+
		"a workflow, this process's %.1f ms", bareLocal.total().Seconds(), bareLocal, perItemMS(cpu[2][0].total, n), perItemMS(cpu[2][1].total, n))
	// The same, against a bare workflow with the notification's start
	// options and payloads: what Outpost's own work costs, and, between this
	// baseline and the one above, what the search attributes, summary and
	// results cost the server.
	ownWork := compare(SectionEndToEnd, "end to end, against the same Temporal work and start options", perSecond(n, notified.total()), "/s",
		Figure{Name: fmt.Sprintf("bare + 1 local activity, started like a notification, %d in flight", p), Value: perSecond(n, likeNotification.total()), Unit: "/s"})
	like, err := likeNotificationHistory(ctx, e)
	if err != nil {
		return nil, err
	}
	ownWork = ownWork.withDetail("what the site store, the forwarder and the central row with its audit events cost beside a delivered notification's "+
		"Temporal work (BareLocalLikeNotificationWorkflow: the forwarder's start options, search attributes and summary, the submission as input, "+
		"the first attempt's answer and the delivered state as results; history %d events, %s bytes): %.1f s (rounds %s); "+
		"the dev server's CPU %.1f ms a workflow, this process's %.1f ms; it runs at %.2fx the bare workflow with a local activity",
		like.events, thousands(int64(like.bytes)), likeNotification.total().Seconds(), likeNotification,
		perItemMS(cpu[3][0].total, n), perItemMS(cpu[3][1].total, n), bareLocal.total().Seconds()/likeNotification.total().Seconds())
	r.step("e2e: one bare workflow, one notification and one cached call, to count the Temporal actions of each history")
	actions, err := r.actionRows(ctx, e, box)
	if err != nil {
		return nil, err
	}
	return append([]Row{row, sameShape, ownWork}, actions...), nil
}

// EndToEndSides name the sides of the end-to-end comparison, as
// Options.EndToEndAlone takes them.
var EndToEndSides = []string{"notifications", "bare", "bare-local", "bare-local-like-notification"}

// send is what starts n items of side.
func (e *endToEnd) send(side string, n int) func(context.Context) error {
	switch side {
	case "notifications":
		return e.throughSite(n)
	case "bare":
		return e.bare(n, BareWorkflow)
	case "bare-local":
		return e.bare(n, BareLocalWorkflow)
	}
	return e.bareLikeNotification(n)
}

// timeAlone runs Options.EndToEndAlone's side by itself: its rate and its
// CPU split without the alternating rounds' neighbours, whose visibility
// writes land in the next round of the other side.
func (r *run) timeAlone(ctx context.Context, e *endToEnd, box *mailbox, serverPID int) ([]Row, error) {
	n, side := r.opts.EndToEnd, r.opts.EndToEndAlone
	r.step("e2e: %s of side %s alone", thousands(int64(n)), side)
	meters := []*cpuOf{{pid: serverPID}, {pid: os.Getpid()}}
	took, err := withCPU(meters, func() (time.Duration, error) { return box.time(ctx, n, e.send(side, n)) })
	if err != nil {
		return nil, fmt.Errorf("e2e side %s alone: %w", side, err)
	}
	row := Row{Section: SectionEndToEnd, Measure: "end to end, " + side + " alone", Value: perSecond(n, took), Unit: "/s"}
	return []Row{row.withDetail("%s in %.1f s, %d in flight; the dev server's CPU %.2f ms an item, this process's %.2f ms; %s",
		thousands(int64(n)), took.Seconds(), r.opts.Parallelism, perItemMS(meters[0].total, n), perItemMS(meters[1].total, n), box.duplicates())}, nil
}

// cpuOf is the CPU one process (pid) used during the rounds measured; with
// tree, its children's too (processTreeCPU).
type cpuOf struct {
	pid   int
	tree  bool
	total time.Duration
}

// read is the CPU the meter's process (or tree) has used so far.
func (m *cpuOf) read() (time.Duration, error) {
	if m.tree {
		return processTreeCPU(m.pid)
	}
	return processCPU(m.pid)
}

// withCPU runs a timed round and adds to each meter the CPU its process
// used meanwhile: what each side costs, beside what it took. The dev
// server writes visibility records after the fact, so some of a round's
// work lands in the next round, of the other side; the sum of both sides
// is exact.
func withCPU(meters []*cpuOf, round func() (time.Duration, error)) (time.Duration, error) {
	before := make([]time.Duration, len(meters))
	for i, m := range meters {
		cpu, err := m.read()
		if err != nil {
			return 0, err
		}
		before[i] = cpu
	}
	took, err := round()
	if err != nil {
		return 0, err
	}
	for i, m := range meters {
		after, err := m.read()
		if err != nil {
			return 0, err
		}
		m.total += after - before[i]
	}
	return took, nil
}

// perItemMS is cpu spread over n items, in milliseconds.
func perItemMS(cpu time.Duration, n int) float64 {
	return float64(cpu) / float64(time.Millisecond) / float64(n)
}

// rounds are the times of one side's rounds.
type rounds []time.Duration

func (rs rounds) total() time.Duration {
	var sum time.Duration
	for _, d := range rs {
		sum += d
	}
	return sum
}

func (rs rounds) String() string {
	parts := make([]string, len(rs))
	for i, d := range rs {
		parts[i] = strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
	}
	return strings.Join(parts, ", ") + " s"
}

// alternate runs each side n rounds, in cycles that go forward and back
// (a b c, c b a, a b c…; for two sides a b b a a b b a…), and returns the
// times of each side's rounds: a drift of the machine weighs on every side
// alike.
func alternate(n int, sides ...func(round int) (time.Duration, error)) ([]rounds, error) {
	times := make([]rounds, len(sides))
	for cycle := range n {
		for i := range sides {
			side := i
			if cycle%2 == 1 {
				side = len(sides) - 1 - i
			}
			d, err := sides[side](cycle)
			if err != nil {
				return nil, err
			}
			times[side] = append(times[side], d)
		}
	}
	return times, nil
}

// share is round's part of n split into parts rounds.
func share(n, parts, round int) int { return n*(round+1)/parts - n*round/parts }

// endToEnd is the system under test: central worker, bare worker and the
// site daemon, all on one Temporal server, and the external system of the
// site's cached calls.
type endToEnd struct {
	tc    client.Client
	site  *sitedaemon.Daemon
	demo  *demosystem.System
	body  string
	par   int
	stops []func() error
}

func (r *run) startEndToEnd(ctx context.Context, tc client.Client, smtpPort int) (*endToEnd, error) {
	e := &endToEnd{tc: tc, body: r.body(), par: r.opts.Parallelism}
	central := r.centralConfig(smtpPort)
	err := e.startCentral(ctx, central)
	if err == nil {
		err = awaitCentralListed(ctx, tc)
	}
	if err == nil {
		err = e.startBare(central)
	}
	if err == nil {
		err = e.startDemoSystem()
	}
	if err == nil {
		err = e.startSite(ctx, r.siteConfig(e.demo.URL()), r)
	}
	if err != nil {
		return nil, errors.Join(err, e.stop())
	}
	return e, nil
}

// awaitCentralListed waits until Temporal lists a central worker of this
// code among the pollers of central's task queue: only then do the sites'
// forwarders start notifications with their input (as they would in
// production, where central runs before a site hands off).
func awaitCentralListed(ctx context.Context, tc client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return workers.AwaitListed(ctx, tc, operation.WorkerBuildID)
}

// centralConfig is the central worker's config: defaults, its store in the
// run's directory, mail to the sink, list benchList with one recipient.
func (r *run) centralConfig(smtpPort int) config.Central {
	c := config.Default().Central
	c.Store.Path = r.path("e2e-central.db")
	c.Listen = "127.0.0.1:0"
	c.SMTP.Port, c.SMTP.TLS, c.SMTP.Timeout = smtpPort, config.SMTPTLSNone, 10*time.Second
	c.Lists = map[string][]string{benchList: {"ops@example.com"}}
	return c
}

// siteConfig is the in-process site daemon's config: defaults, its store in
// the run's directory, the run's parallelism, any free API port, and the
// external system at demoURL with a short retry interval.
func (r *run) siteConfig(demoURL string) config.Site {
	c := config.Default().Site
	c.ID, c.Node, c.Store, c.Listen = benchSite, benchNode, r.path("e2e-site.db"), "127.0.0.1:0"
	c.ForwardParallelism = r.opts.Parallelism
	erp := config.DefaultExternalSystem()
	erp.BaseURL, erp.Timeout, erp.RetryInterval = demoURL+"/api", 5*time.Second, 2*time.Second
	erp.Methods = map[string]config.Method{benchMethod: {Verb: "POST", Path: "/orders"}}
	c.ExternalSystems = map[string]config.ExternalSystem{benchSystem: erp}
	return c
}

func (e *endToEnd) startCentral(ctx context.Context, cfg config.Central) error {
	metrics := workers.NewCentralMetrics()
	opts, err := fromconfig.Central(cfg, config.Temporal{Namespace: namespace})
	if err != nil {
		return errors.Join(err, metrics.Close())
	}
	central, err := workers.NewCentral(ctx, opts, e.tc, metrics.Registry, zap.NewNop())
	if err != nil {
		return errors.Join(err, metrics.Close())
	}
	e.run(ctx, central.Run, metrics.Close)
	return nil
}

func (e *endToEnd) startBare(cfg config.Central) error {
	w := worker.New(e.tc, bareTaskQueue, workers.PollerOptions())
	w.RegisterWorkflow(BareWorkflow)
	w.RegisterWorkflow(BareLocalWorkflow)
	w.RegisterWorkflow(BareLocalLikeNotificationWorkflow)
	mail, err := fromconfig.Mailer(cfg.SMTP)
	if err != nil {
		return err
	}
	policy := contract.RetryPolicy{Interval: cfg.SMTP.RetryInterval, MaxRetries: cfg.SMTP.MaxRetries, AttemptTimeout: cfg.SMTP.Timeout}
	w.RegisterActivity(&BareActivities{Mailer: notification.NewMailer(mail), To: cfg.Lists[benchList], Policy: policy})
	if err := w.Start(); err != nil {
		return fmt.Errorf("start bare worker: %w", err)
	}
	e.stops = append(e.stops, func() error { w.Stop(); return nil })
	return nil
}

func (e *endToEnd) startDemoSystem() error {
	demo, err := demosystem.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	e.demo = demo
	e.stops = append(e.stops, demo.Close)
	return nil
}

func (e *endToEnd) startSite(ctx context.Context, cfg config.Site, r *run) error {
	d, err := sitedaemon.StartDaemon(ctx, fromconfig.SiteDaemon(cfg), e.tc, nil, r.log.Named("site"))
	if err != nil {
		return err
	}
	e.site = d
	e.run(ctx, d.Run, nil)
	return nil
}

// run runs fn until stop, which cancels it, waits for it, then calls after.
func (e *endToEnd) run(ctx context.Context, fn func(context.Context) error, after func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	e.stops = append(e.stops, func() error {
		cancel()
		err := <-done
		if after != nil {
			err = errors.Join(err, after())
		}
		return err
	})
}

// stop stops everything started, last first.
func (e *endToEnd) stop() error {
	var errs []error
	for i := len(e.stops) - 1; i >= 0; i-- {
		errs = append(errs, e.stops[i]())
	}
	e.stops = nil
	return errors.Join(errs...)
}

// throughSite notifies n times through the site SDK, Parallelism at once.
func (e *endToEnd) throughSite(n int) func(context.Context) error {
	return func(ctx context.Context) error {
		return parallel(ctx, n, e.par, func(ctx context.Context, _ int) error {
			_, err := e.site.Client.Notify(ctx, benchList, benchSubject, e.body)
			return err
		})
	}
}

// bare starts wf (BareWorkflow or BareLocalWorkflow) n times,
// Parallelism at once.
func (e *endToEnd) bare(n int, wf func(workflow.Context, BareInput) error) func(context.Context) error {
	return func(ctx context.Context) error {
		return parallel(ctx, n, e.par, func(ctx context.Context, _ int) error {
			id := uuid.NewString()
			_, err := e.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "bare/" + id, TaskQueue: bareTaskQueue},
				wf, BareInput{ID: id, Subject: benchSubject, Body: e.body})
			return err
		})
	}
}

// bareLikeNotification starts BareLocalLikeNotificationWorkflow n times,
// Parallelism at once.
func (e *endToEnd) bareLikeNotification(n int) func(context.Context) error {
	return func(ctx context.Context) error {
		return parallel(ctx, n, e.par, func(ctx context.Context, _ int) error {
			_, err := e.startLikeNotification(ctx)
			return err
		})
	}
}

// startLikeNotification starts one BareLocalLikeNotificationWorkflow with
// a notification's start options (its id made as the site SDK makes one;
// its site attribute names no real site) and returns its run.
func (e *endToEnd) startLikeNotification(ctx context.Context) (client.WorkflowRun, error) {
	id, err := site.NewID()
	if err != nil {
		return nil, err
	}
	sub := contract.NotificationSubmission{NotificationID: id, ListName: benchList, Subject: benchSubject, Body: e.body,
		SourceSiteID: bareSite, SourceNode: benchNode, SiteEnqueuedAt: time.Now()}
	opts := sitedaemon.NotificationStartOptions(sub, false)
	opts.ID, opts.TaskQueue = "bare/"+id, bareTaskQueue
	return e.tc.ExecuteWorkflow(ctx, opts, BareLocalLikeNotificationWorkflow, sub)
}

// likeNotificationHistory runs one BareLocalLikeNotificationWorkflow to its
// end and counts its history, to set beside a delivered notification's.
func likeNotificationHistory(ctx context.Context, e *endToEnd) (actionCount, error) {
	run, err := e.startLikeNotification(ctx)
	if err == nil {
		err = run.Get(ctx, nil)
	}
	if err != nil {
		return actionCount{}, fmt.Errorf("one bare workflow started like a notification, to count its history: %w", err)
	}
	return countActions(ctx, e.tc, run.GetID())
}

// mailbox counts what the SMTP sink received.
type mailbox struct {
	sink     *smtpsink.Sink
	received atomic.Int64
}

func newMailbox(sink *smtpsink.Sink) *mailbox {
	b := &mailbox{sink: sink}
	sink.OnEmail(func(smtpsink.Message) { b.received.Add(1) })
	return b
}

// time runs send and returns how long until n more emails arrived.
func (b *mailbox) time(ctx context.Context, n int, send func(context.Context) error) (time.Duration, error) {
	want := b.received.Load() + int64(n)
	start := time.Now()
	if err := send(ctx); err != nil {
		return 0, err
	}
	err := waitFor(ctx, drainTimeout(n), nil, func(context.Context) (bool, error) {
		return b.received.Load() >= want, nil
	}, func() string {
		return fmt.Sprintf("%s of %s emails received", thousands(b.received.Load()-want+int64(n)), thousands(int64(n)))
	})
	return time.Since(start), err
}

// duplicates says whether any notification was mailed twice.
func (b *mailbox) duplicates() string {
	twice := 0
	for _, n := range b.sink.CountByNotification() {
		if n > 1 {
			twice++
		}
	}
	if twice == 0 {
		return "no email sent twice"
	}
	return fmt.Sprintf("%d emails sent more than once", twice)
}
