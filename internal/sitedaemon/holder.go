package sitedaemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/site"
)

// checkTimeout bounds a look at the site's task queue: a site must take
// work while central is away, so a daemon that cannot look starts active,
// and a later look that cannot be made keeps the role without holding up
// the worker.
const checkTimeout = 2 * time.Second

// siteHold decides whether this daemon acts for its site. Another daemon
// holds the site when its poller on the site's task queue is live and its
// identity says active (pollerWatch). A daemon starts active only when no
// other holds the site, and then checks every PollerCheckInterval:
//
//   - active: when another active daemon precedes it (two started at once
//     and both saw nobody), it yields and waits; exactly one of the two
//     does, since both compare the same identities;
//   - waiting: when no live active daemon is left (the holder's poller
//     stood still for HolderGrace), it becomes active.
//
// A waiting daemon takes no new operations (the API answers 503, its SDK
// client refuses), but strands nothing it already holds: the forwarder
// keeps handing off its buffer, which is safe beside the holder because
// operation ids are unique and a second hand-off of one is refused as
// already started (or, signalled, ignored), and its
// worker polls the site's task queue, as waiting, for as long as it holds
// cached calls that are not settled, so their retries reach it.
type siteHold struct {
	pollers *pollerWatch
	store   *sitestore.Store
	active  prometheus.Gauge
	log     *zap.Logger

	mu     sync.Mutex
	role   role
	holder string // while waiting: the identity of the daemon holding the site
}

var siteActiveDesc = "1 while this daemon acts for its site, 0 while it waits because another daemon with this site id holds it."

func newSiteHold(pollers *pollerWatch, store *sitestore.Store, log *zap.Logger) *siteHold {
	return &siteHold{pollers: pollers, store: store, log: log,
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outpost_site_active", Help: siteActiveDesc})}
}

// start takes the first role: waiting when any live active daemon holds
// the site, active otherwise, or when central cannot be asked.
func (h *siteHold) start(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	live, err := h.pollers.liveOthers(ctx)
	if err != nil {
		h.log.Warn("cannot list the site task queue's pollers (central unreachable?): starting active; "+
			"another daemon with this site id, if any, is resolved once central answers", zap.Error(err))
		h.become(roleActive, "")
		return
	}
	if holder, ok := firstHolder(live); ok {
		h.waitFor(holder)
		return
	}
	h.become(roleActive, "")
}

// check looks at the live daemons and changes role if it must.
func (h *siteHold) check(ctx context.Context) {
	lookCtx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	live, err := h.pollers.liveOthers(lookCtx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Debug("cannot list the site task queue's pollers; keeping the role", zap.Error(err))
		}
		return
	}
	holder, held := firstHolder(live)
	switch h.currentRole() {
	case roleActive:
		if held && holder.id.precedes(h.pollers.self) {
			h.waitFor(holder)
		}
	case roleWaiting:
		if !held {
			h.log.Info("no other daemon holds the site any more: this daemon is active", zap.String("self", h.pollers.self.as(roleActive).String()))
			h.become(roleActive, "")
		} else {
			h.become(roleWaiting, holder.raw)
		}
	}
}

// firstHolder is the live active daemon that precedes the others.
func firstHolder(live []peer) (peer, bool) {
	var first peer
	found := false
	for _, p := range live {
		if p.holds() && (!found || p.id.precedes(first.id)) {
			first, found = p, true
		}
	}
	return first, found
}

// waitFor makes this daemon wait for holder, and tells the operator.
func (h *siteHold) waitFor(holder peer) {
	h.log.Error("another daemon holds site "+h.pollers.self.site+": this daemon waits and takes no new operations "+
		"(it still hands off and retries what it already holds). Send the site's work to the holder, and give this daemon "+
		"its own site.id or stop it; it takes the site over by itself if the holder stops polling for site.holder_grace",
		zap.String("holder", holder.raw), zap.String("self", h.pollers.self.as(roleWaiting).String()),
		zap.Duration("holderGrace", h.pollers.grace))
	h.become(roleWaiting, holder.raw)
}

func (h *siteHold) become(r role, holder string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.role, h.holder = r, holder
	if r == roleActive {
		h.active.Set(1)
	} else {
		h.active.Set(0)
	}
}

func (h *siteHold) currentRole() role {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.role
}

func (h *siteHold) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.pollers.others, h.active}
}

// identity is this daemon's poller identity in its current role.
func (h *siteHold) identity() daemonIdentity {
	return h.pollers.self.as(h.currentRole())
}

// admit refuses new operations while another daemon holds the site.
func (h *siteHold) admit() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.role == roleActive {
		return nil
	}
	return &site.UnavailableError{Holder: h.holder, Reason: fmt.Sprintf(
		"site %s is held by another daemon (%s); this one waits and takes no new operations: send them to the holder, "+
			"or stop it and this daemon takes over within site.holder_grace (%s)", h.pollers.self.site, h.holder, h.pollers.grace)}
}

// describe is the role as /readyz says it.
func (h *siteHold) describe() (active bool, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.role == roleActive {
		return true, string(roleActive)
	}
	return false, "waiting: site held by " + h.holder + "; send the site's work there, or stop it and this daemon takes over"
}

// pollAs is the identity the site worker polls under now, or false when it
// must not poll: active, or waiting while the store holds cached calls not
// yet settled (their retries come through the task queue).
func (h *siteHold) pollAs(ctx context.Context) (daemonIdentity, bool) {
	self := h.identity()
	if self.role == roleActive {
		return self, true
	}
	unsettled, err := h.unsettledCalls(ctx)
	if err != nil {
		h.log.Error("count unsettled cached calls; polling meanwhile so none is stranded", zap.Error(err))
		return self, true
	}
	return self, unsettled > 0
}

// unsettledCalls counts the cached calls whose retries may still come: any
// not Delivered, Failed or Discarded (a Parked one waits for an operator).
func (h *siteHold) unsettledCalls(ctx context.Context) (int, error) {
	counts, err := h.store.TrackingCounts(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for status, count := range counts {
		if !contract.Status(status).Terminal() {
			n += count
		}
	}
	return n, nil
}
