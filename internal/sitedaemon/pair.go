package sitedaemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/site"
)

// A pair is two daemons for one site: one active, one standby.
//
//   - The active node does the site's work: it takes operations, hands
//     them off, runs the site worker, telemetry, purge and local retries.
//     Every change of its store goes to the standby in order (changeFeed),
//     without waiting for it; in sync mode a write is answered once the
//     standby applied it.
//   - The standby asks the active node for the changes after its own
//     position and applies them to its copy (replicate). A copy that does
//     not follow on (it was behind what the feed holds, or took changes of
//     its own while active) is replaced by a full copy, after the node has
//     handed over every operation it holds: whatever it accepted that the
//     active lacks is adopted, so nothing accepted is lost, even in async
//     mode. Duplicates are harmless: one workflow per operation id.
//   - The nodes exchange heartbeats (role, epoch, position). A standby that
//     hears nothing from the active for FailoverAfter takes over with a
//     higher epoch. A node that learns of an active node with a higher
//     epoch stops its work at once and becomes standby. Two standbys: the
//     preferred node (then the smaller node name) becomes active. Two
//     actives after a partition heals: the lower epoch steps down.
type pair struct {
	site, node string
	opts       PeerOptions
	store      *sitestore.Store
	peer       *peerClient
	feed       *changeFeed
	log        *zap.Logger
	heartbeat  time.Duration
	metrics    *pairMetrics
	self       daemonIdentity // the site worker's poller identity

	mu           sync.Mutex
	role         pairRole
	epoch        int64
	lastContact  time.Time     // last heartbeat exchanged with the peer, either way
	peerState    heartbeat     // what the peer last said
	lastFailover time.Time     // when this node last took over
	changed      chan struct{} // closed on every role change
	caughtUpAt   time.Time     // standby: when its copy was last at the active's position
	following    bool          // standby: its copy follows the active's stream (last pull applied)
	// applyLags are the latest changes' times from commit on the active
	// node to applied here (ApplyLags), at most maxApplyLags of them.
	applyLags []time.Duration
}

// maxApplyLags bounds the apply lags a standby keeps.
const maxApplyLags = 1 << 16

type pairRole string

const (
	pairActive  pairRole = "active"
	pairStandby pairRole = "standby"
)

// heartbeat is what the nodes tell each other.
type heartbeat struct {
	Site     string    `json:"site"`
	Node     string    `json:"node"`
	Role     pairRole  `json:"role"`
	Epoch    int64     `json:"epoch"`
	Position int64     `json:"position"`
	Prefer   bool      `json:"prefer"`
	At       time.Time `json:"at"`
}

// startPair opens the pair side of a daemon: it starts as standby (a node
// that restarts never assumes it is still active) at its stored epoch.
func startPair(ctx context.Context, opts Options, store *sitestore.Store, log *zap.Logger) (*pair, error) {
	secret := strings.TrimSpace(os.Getenv(opts.Peer.SecretEnv))
	if secret == "" {
		return nil, fmt.Errorf("site.peer.secret_env: $%s is not set: export the secret both nodes share there", opts.Peer.SecretEnv)
	}
	peer, err := newPeerClient(opts.Peer.Address, secret, opts.Peer.CAFile)
	if err != nil {
		return nil, err
	}
	epoch, err := store.Epoch(ctx)
	if err != nil {
		return nil, err
	}
	head, err := store.Position(ctx)
	if err != nil {
		return nil, err
	}
	storeID, err := store.StoreID(ctx)
	if err != nil {
		return nil, err
	}
	p := &pair{
		self: daemonIdentity{site: opts.ID, node: opts.Node, store: storeID, started: time.Now(), role: roleActive},
		site: opts.ID, node: opts.Node, opts: opts.Peer, store: store, peer: peer, log: log,
		heartbeat: heartbeatEvery(opts.Peer.FailoverAfter), role: pairStandby, epoch: epoch,
		lastContact: time.Now(), changed: make(chan struct{}),
	}
	p.metrics = newPairMetrics(p)
	p.feed = newChangeFeed(head, 3*p.heartbeat, opts.Peer.FailoverAfter, p.metrics.unsynced.Inc)
	var await func(int64)
	if opts.Peer.Sync {
		await = p.feed.await
	}
	store.SetStandby(true)
	if err := store.EnableReplication(ctx, p.feed, await); err != nil {
		return nil, err
	}
	p.metrics.setRole(pairStandby, epoch)
	log.Info("site pair: starting as standby", zap.String("peer", opts.Peer.Address), zap.Int64("epoch", epoch),
		zap.Bool("sync", opts.Peer.Sync), zap.Duration("failoverAfter", opts.Peer.FailoverAfter))
	return p, nil
}

// heartbeatEvery is how often the nodes exchange heartbeats: five per
// failover_after, so one lost heartbeat never triggers a failover.
func heartbeatEvery(failoverAfter time.Duration) time.Duration {
	return min(max(failoverAfter/5, 50*time.Millisecond), time.Second)
}

// run exchanges heartbeats and takes over when the active node is silent.
func (p *pair) run(ctx context.Context) error {
	tick := time.NewTicker(p.heartbeat)
	defer tick.Stop()
	for {
		p.exchange(ctx)
		p.decide(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// exchange sends this node's heartbeat and learns from the answer.
func (p *pair) exchange(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, p.heartbeat)
	defer cancel()
	theirs, err := p.peer.heartbeat(ctx, p.state(ctx))
	if err != nil {
		p.log.Debug("heartbeat to the peer failed", zap.Error(err))
		return
	}
	p.learn(ctx, theirs)
}

// state is this node's heartbeat.
func (p *pair) state(ctx context.Context) heartbeat {
	pos, _ := p.store.Position(ctx) // a read error leaves 0: the position is for display and lag only
	p.mu.Lock()
	defer p.mu.Unlock()
	return heartbeat{Site: p.site, Node: p.node, Role: p.role, Epoch: p.epoch, Position: pos.Number, Prefer: p.opts.Prefer, At: time.Now()}
}

// learn takes in what the peer said: it steps down before an active peer
// with a higher epoch (or the same epoch and the tie-break), and adopts a
// higher epoch it sees.
func (p *pair) learn(ctx context.Context, theirs heartbeat) {
	p.mu.Lock()
	p.lastContact, p.peerState = time.Now(), theirs
	stepDown := theirs.Role == pairActive && p.role == pairActive &&
		(theirs.Epoch > p.epoch || theirs.Epoch == p.epoch && p.yieldsTo(theirs))
	adopt := !stepDown && theirs.Role == pairActive && theirs.Epoch > p.epoch
	if adopt {
		p.epoch = theirs.Epoch
	}
	epoch := p.epoch
	p.mu.Unlock()
	switch {
	case stepDown:
		p.stepDown(ctx, theirs)
	case adopt:
		p.saveEpoch(ctx, epoch)
	}
}

// yieldsTo breaks a tie between two nodes in the same role and epoch: the
// preferred node wins, then the smaller node name.
func (p *pair) yieldsTo(theirs heartbeat) bool {
	if theirs.Prefer != p.opts.Prefer {
		return theirs.Prefer
	}
	return theirs.Node < p.node
}

// decide makes a standby active when the active node has been silent for
// FailoverAfter, or when both are standby and this node wins the tie.
func (p *pair) decide(ctx context.Context) {
	p.mu.Lock()
	if p.role != pairStandby {
		p.mu.Unlock()
		return
	}
	silent := time.Since(p.lastContact)
	peer := p.peerState
	p.mu.Unlock()
	switch {
	case silent > p.opts.FailoverAfter:
		p.takeOver(ctx, fmt.Sprintf("no heartbeat from the peer at %s for %s (site.failover_after %s)",
			p.opts.Address, silent.Round(time.Millisecond), p.opts.FailoverAfter), true)
	case peer.Role == pairStandby && !p.yieldsTo(peer):
		p.takeOver(ctx, "both nodes are standby and this one is preferred (site.peer.prefer, then the smaller node name)", false)
	}
}

// takeOver makes this node active under a higher epoch than either node
// has seen.
func (p *pair) takeOver(ctx context.Context, why string, failover bool) {
	head, err := p.store.Position(ctx)
	if err != nil {
		p.log.Error("cannot take over: the site store does not answer", zap.Error(err))
		return
	}
	p.mu.Lock()
	p.epoch = max(p.epoch, p.peerState.Epoch) + 1
	epoch := p.epoch
	p.mu.Unlock()
	if err := p.store.SetEpoch(ctx, epoch); err != nil {
		p.log.Error("cannot take over: saving the epoch failed", zap.Error(err))
		return
	}
	p.feed.reset(head)
	p.store.SetStandby(false)
	p.mu.Lock()
	p.role = pairActive
	if failover {
		p.lastFailover = time.Now()
	}
	p.signalLocked()
	p.mu.Unlock()
	if failover {
		p.metrics.failovers.Inc()
	}
	p.metrics.setRole(pairActive, epoch)
	p.log.Warn("site pair: this node is now active", zap.String("why", why), zap.Int64("epoch", epoch), zap.Int64("position", head.Number))
}

// stepDown makes this node standby at once: its store refuses writes, and
// the daemon stops the forwarder, worker, telemetry, purge and retries.
// What it accepted that the active lacks is handed over before its copy is
// replaced (replicate).
func (p *pair) stepDown(ctx context.Context, active heartbeat) {
	p.store.SetStandby(true)
	p.mu.Lock()
	p.role, p.epoch = pairStandby, active.Epoch
	p.signalLocked()
	p.mu.Unlock()
	p.saveEpoch(ctx, active.Epoch)
	p.metrics.setRole(pairStandby, active.Epoch)
	p.log.Warn("site pair: another node is active with a higher epoch: this node stepped down to standby and hands over what it holds",
		zap.String("active", active.Node), zap.Int64("epoch", active.Epoch))
}

func (p *pair) saveEpoch(ctx context.Context, epoch int64) {
	if err := p.store.SetEpoch(ctx, epoch); err != nil {
		p.log.Error("save the epoch", zap.Int64("epoch", epoch), zap.Error(err))
	}
}

func (p *pair) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// current is the node's role and a channel closed when it changes.
func (p *pair) current() (pairRole, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.role, p.changed
}

// admit refuses new operations on the standby, naming the active node.
func (p *pair) admit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role == pairActive {
		return nil
	}
	return &site.UnavailableError{Holder: p.opts.Address, Reason: fmt.Sprintf(
		"this node (%s) is the standby of site %s: send operations to the active node at %s", p.node, p.site, p.opts.Address)}
}

// describe is the role as /readyz says it.
func (p *pair) describe() (active bool, text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.role == pairActive {
		return true, "active"
	}
	return false, "standby: the active node is " + p.opts.Address
}

// onHeartbeat answers the peer's heartbeat and learns from it.
func (p *pair) onHeartbeat(ctx context.Context, theirs heartbeat) (heartbeat, error) {
	if theirs.Site != p.site {
		return heartbeat{}, fmt.Errorf("the peer %s is a node of site %q, this one of %q: check site.id and site.peer.address on both", theirs.Node, theirs.Site, p.site)
	}
	if theirs.Node == p.node {
		return heartbeat{}, fmt.Errorf("the peer has this node's name %q: give each node of a pair its own site.node", p.node)
	}
	p.learn(ctx, theirs)
	return p.state(ctx), nil
}

// replicate keeps a standby's copy following the active node's stream.
func (p *pair) replicate(ctx context.Context) error {
	for ctx.Err() == nil {
		role, changed := p.current()
		if role != pairStandby || !p.peerIsActive() {
			select {
			case <-ctx.Done():
			case <-changed:
			case <-time.After(p.heartbeat):
			}
			continue
		}
		err := p.follow(ctx)
		p.setFollowing(false)
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, sitestore.ErrResync) {
				p.resync(ctx)
				continue
			}
			p.log.Debug("replication from the active node paused", zap.Error(err))
			sleep(ctx, p.heartbeat)
		}
	}
	return nil
}

func (p *pair) peerIsActive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peerState.Role == pairActive && time.Since(p.lastContact) < p.opts.FailoverAfter
}

// follow keeps the copy following the active node's stream until an
// error or this node stops being standby. Pulling and applying overlap:
// while one answer is applied the next is already asked for, so a change
// committed during an apply does not wait for it to end before it travels;
// the answers that queued meanwhile are applied together (withQueued).
// Each pull acknowledges what was applied by then; in sync mode, where the
// active node's callers wait for it, each apply is acknowledged at once.
func (p *pair) follow(ctx context.Context) error {
	pos, err := p.store.Position(ctx)
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	answers := make(chan pulled, 2)
	var applied atomic.Pointer[sitestore.Position] // moved by applyAnswers, read by pull
	applied.Store(&pos)
	g.Go(func() error {
		defer close(answers)
		return p.pull(ctx, pos, &applied, answers)
	})
	g.Go(func() error { return p.applyAnswers(ctx, answers, &applied) })
	return g.Wait()
}

// pull asks for the changes after those received, acknowledging those
// applied, and queues each answer that has changes for applyAnswers.
func (p *pair) pull(ctx context.Context, received sitestore.Position, applied *atomic.Pointer[sitestore.Position], answers chan<- pulled) error {
	for ctx.Err() == nil {
		if role, _ := p.current(); role != pairStandby {
			return nil
		}
		answer, err := p.peer.changes(ctx, received, *applied.Load(), p.heartbeat)
		if err != nil {
			return err
		}
		p.mu.Lock()
		p.lastContact = time.Now()
		if answer.behind == 0 && len(answer.changes) == 0 {
			p.caughtUpAt = time.Now()
		}
		p.mu.Unlock()
		if len(answer.changes) == 0 {
			p.setFollowing(true)
			continue
		}
		last := answer.changes[len(answer.changes)-1]
		received = sitestore.Position{Number: last.Number, Checksum: last.Checksum}
		select {
		case answers <- answer:
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// applyAnswers applies the pulled changes in order.
func (p *pair) applyAnswers(ctx context.Context, answers <-chan pulled, applied *atomic.Pointer[sitestore.Position]) error {
	for answer := range answers {
		answer = withQueued(answer, answers)
		if err := p.store.ApplyChanges(ctx, answer.changes); err != nil {
			return err
		}
		p.noteApplied(answer.changes, time.Now())
		last := answer.changes[len(answer.changes)-1]
		pos := sitestore.Position{Number: last.Number, Checksum: last.Checksum}
		applied.Store(&pos)
		if answer.awaited {
			if err := p.peer.applied(ctx, pos); err != nil {
				return err
			}
		}
		p.setFollowing(true)
	}
	return nil
}

// withQueued adds to answer the changes of the answers queued behind it,
// so that one transaction, one fsync, applies them all: the active node
// commits as often as its writes come, and a standby syncing its disk once
// an answer fell behind it (sync replication at 5,000 enqueues/s: p50
// 14-20 ms, 8-9 ms with the answers merged).
func withQueued(answer pulled, answers <-chan pulled) pulled {
	for {
		select {
		case next, ok := <-answers:
			if !ok {
				return answer
			}
			answer.changes = append(answer.changes, next.changes...)
			answer.awaited = answer.awaited || next.awaited
		default:
			return answer
		}
	}
}

// noteApplied keeps each change's lag from its commit on the active node.
// The nodes' clocks must agree for it to mean anything; the bench runs
// both in one process.
func (p *pair) noteApplied(changes []sitestore.Change, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range changes {
		p.applyLags = append(p.applyLags, at.Sub(c.At))
	}
	// Trimmed only at twice the bound, so the copy happens once per
	// maxApplyLags changes, not on every apply.
	if len(p.applyLags) > 2*maxApplyLags {
		p.applyLags = append(p.applyLags[:0], p.applyLags[len(p.applyLags)-maxApplyLags:]...)
	}
}

func (p *pair) setFollowing(following bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.following = following
}

// resync hands over every operation this node holds, then replaces its
// copy with a snapshot of the active node's store.
func (p *pair) resync(ctx context.Context) {
	h, err := p.store.HandoverSet(ctx)
	if err != nil {
		p.log.Error("read the operations to hand over", zap.Error(err))
		sleep(ctx, p.heartbeat)
		return
	}
	adopted, err := p.peer.handover(ctx, h)
	if err != nil {
		p.log.Warn("hand-over to the active node failed; trying again before any resync", zap.Error(err))
		sleep(ctx, p.heartbeat)
		return
	}
	p.metrics.handedOver.Add(float64(adopted))
	if adopted > 0 {
		p.log.Warn("handed over operations the active node lacked", zap.Int("operations", adopted))
	}
	pos, err := p.peer.restoreSnapshot(ctx, p.store)
	if err != nil {
		p.log.Warn("full resync from the active node failed; trying again", zap.Error(err))
		sleep(ctx, p.heartbeat)
		return
	}
	p.metrics.resyncs.Inc()
	p.log.Info("full resync from the active node done", zap.Int64("position", pos.Number), zap.Int("handedOver", adopted))
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// lag is how far the standby is behind: from the feed on the active node,
// from the last heartbeat on the standby.
func (p *pair) lag(ctx context.Context) (changes int64, age time.Duration) {
	p.mu.Lock()
	role, peer, caughtUp := p.role, p.peerState, p.caughtUpAt
	p.mu.Unlock()
	if role == pairActive {
		return p.feed.lag(time.Now())
	}
	pos, err := p.store.Position(ctx)
	if err != nil || peer.Position <= pos.Number {
		return 0, 0
	}
	if !caughtUp.IsZero() {
		age = time.Since(caughtUp)
	}
	return peer.Position - pos.Number, age
}

// pollAs: a pair's node runs the site worker only while active (the
// daemon stops it on stepping down), under its active identity.
func (p *pair) pollAs(context.Context) (daemonIdentity, bool) { return p.self, true }

// check: a pair decides roles by heartbeats (run), not by pollers.
func (p *pair) check(context.Context) {}

func (p *pair) collectors() []prometheus.Collector { return p.metrics.collectors() }

// PairStatus is GET /v1/pair: both nodes as this one sees them.
type PairStatus struct {
	Self        heartbeat `json:"self"`
	Peer        heartbeat `json:"peer"`
	PeerAddress string    `json:"peerAddress"`
	PeerSeen    time.Time `json:"peerSeen"`
	Sync        bool      `json:"sync"`
	LagChanges  int64     `json:"lagChanges"`
	LagSeconds  float64   `json:"lagSeconds"`
	// Following is true on a standby whose copy follows the active node's
	// stream: it applied the last changes it asked for, with no resync due.
	Following    bool      `json:"following"`
	LastFailover time.Time `json:"lastFailover,omitzero"`
}

func (p *pair) status(ctx context.Context) PairStatus {
	self := p.state(ctx)
	changes, age := p.lag(ctx)
	p.mu.Lock()
	defer p.mu.Unlock()
	return PairStatus{Self: self, Peer: p.peerState, PeerAddress: p.opts.Address, PeerSeen: p.lastContact, Sync: p.opts.Sync,
		LagChanges: changes, LagSeconds: age.Seconds(), Following: p.role == pairStandby && p.following, LastFailover: p.lastFailover}
}

// pairMetrics are the pair's metrics on /metrics.
type pairMetrics struct {
	active, epoch                            prometheus.Gauge
	failovers, resyncs, handedOver, unsynced prometheus.Counter
	lagChanges, lagSeconds                   prometheus.GaugeFunc
}

func newPairMetrics(p *pair) *pairMetrics {
	lag := func() (int64, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return p.lag(ctx)
	}
	return &pairMetrics{
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outpost_site_active", Help: "1 while this node is the active node of its site, 0 while it is standby."}),
		epoch:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "outpost_site_epoch", Help: "The pair's epoch as this node knows it: it rises with every takeover."}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "outpost_site_failovers_total",
			Help: "Times this node took over because the active node was silent for site.failover_after."}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{Name: "outpost_site_resyncs_total",
			Help: "Full copies of the active node's store this node took (its copy did not follow on)."}),
		handedOver: prometheus.NewCounter(prometheus.CounterOpts{Name: "outpost_site_handed_over_operations_total",
			Help: "Operations this node handed over to the active node that it lacked (accepted here, not yet replicated)."}),
		unsynced: prometheus.NewCounter(prometheus.CounterOpts{Name: "outpost_site_replication_unsynced_writes_total",
			Help: "Writes in sync mode answered without the standby's acknowledgement (no standby following, or it did not answer in time)."}),
		lagChanges: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "outpost_site_replication_lag_changes",
			Help: "Changes the standby has not applied yet."}, func() float64 { n, _ := lag(); return float64(n) }),
		lagSeconds: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "outpost_site_replication_lag_seconds",
			Help: "Age of the oldest change the standby has not applied yet (0 when it has them all)."}, func() float64 { _, a := lag(); return a.Seconds() }),
	}
}

func (m *pairMetrics) setRole(r pairRole, epoch int64) {
	if r == pairActive {
		m.active.Set(1)
	} else {
		m.active.Set(0)
	}
	m.epoch.Set(float64(epoch))
}

func (m *pairMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.active, m.epoch, m.failovers, m.resyncs, m.handedOver, m.unsynced, m.lagChanges, m.lagSeconds}
}
