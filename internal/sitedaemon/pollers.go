package sitedaemon

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/outpost-dev/outpost/contract"
)

// role is what a daemon does for its site: one daemon per site id is
// active, any other waits (see siteHold).
type role string

const (
	roleActive  role = "active"
	roleWaiting role = "waiting"
)

// daemonIdentity is what a daemon's poller identity on the site's task
// queue tells the other daemons of the site id: its store file (a
// restarted daemon knows its own earlier runs by it), when it started (the
// later start yields when two are active) and its role.
type daemonIdentity struct {
	site, node, store string
	started           time.Time
	role              role
}

// identityFormat spells a daemonIdentity; each field is one word.
const identityFormat = "outpost-site %s node %s store %s started %s %s"

func (d daemonIdentity) String() string {
	return fmt.Sprintf(identityFormat, d.site, d.node, d.store, d.started.UTC().Format(time.RFC3339Nano), d.role)
}

// as is d in role r: the identity its worker polls under.
func (d daemonIdentity) as(r role) daemonIdentity {
	d.role = r
	return d
}

// parseIdentity reads a poller identity written by String.
func parseIdentity(s string) (daemonIdentity, bool) {
	var d daemonIdentity
	var started, r string
	if n, err := fmt.Sscanf(s, identityFormat, &d.site, &d.node, &d.store, &started, &r); n != 5 || err != nil {
		return daemonIdentity{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, started)
	if err != nil || (r != string(roleActive) && r != string(roleWaiting)) {
		return daemonIdentity{}, false
	}
	d.started, d.role = t, role(r)
	if d.String() != s { // trailing words, or a time not spelled as String spells it
		return daemonIdentity{}, false
	}
	return d, true
}

// precedes reports whether d keeps the site when d and o are both active:
// the earlier start, and on a tie the smaller store id. Both daemons
// compare the same two identities, so exactly one of them yields.
func (d daemonIdentity) precedes(o daemonIdentity) bool {
	if !d.started.Equal(o.started) {
		return d.started.Before(o.started)
	}
	return d.store < o.store
}

// peer is another daemon's poller seen on the site's task queue.
type peer struct {
	raw string // its identity as listed
	id  daemonIdentity
}

// holds reports whether the peer is, or may be, an active daemon. A
// poller whose identity Outpost did not write (a daemon of an older
// version) is taken for an active one started before any other: two
// daemons must never act for one site.
func (p peer) holds() bool { return p.id.role == roleActive }

// pollerWatch lists the other pollers of the site's task queue and tells
// the live ones. Temporal keeps listing a poller minutes after it stopped,
// with the time of its last poll; an idle live poller polls again every
// long poll (a minute). A poller is live while its last access time moved
// within grace, measured on this daemon's own clock: a site clock that
// disagrees with the server's changes nothing. One first seen counts as
// live until it has stood still for grace. Time this daemon could not look
// (a listing failed: central unreachable, or slower than checkTimeout) is
// not counted as standing still, since nobody may have been able to poll
// then; the stillness seen before it still counts, so one slow answer
// delays a takeover by its own length, not by a whole grace.
type pollerWatch struct {
	tc     client.Client
	self   daemonIdentity
	grace  time.Duration
	now    func() time.Time
	seen   map[string]pollerActivity
	others prometheus.Gauge
	log    *zap.Logger
	// reported is the last set of live others logged.
	reported []string
	// lastLook is when the last listing succeeded; blind is set when one
	// failed since.
	lastLook time.Time
	blind    bool
}

// pollerActivity is a poller's last access time and when this daemon saw
// it change.
type pollerActivity struct{ access, movedAt time.Time }

var otherPollersDesc = "Other live pollers on this site's task queue: another daemon runs with this site id (should be 0)."

func newPollerWatch(tc client.Client, self daemonIdentity, grace time.Duration, log *zap.Logger) *pollerWatch {
	return &pollerWatch{tc: tc, self: self, grace: grace, now: time.Now, seen: map[string]pollerActivity{}, log: log,
		others: prometheus.NewGauge(prometheus.GaugeOpts{Name: "outpost_site_other_pollers", Help: otherPollersDesc})}
}

// liveOthers lists the pollers of other daemons that are live, leaving out
// this store's earlier runs, sorted by identity.
func (p *pollerWatch) liveOthers(ctx context.Context) ([]peer, error) {
	queue := contract.SiteTaskQueue(p.self.site)
	resp, err := p.tc.DescribeTaskQueue(ctx, queue, enums.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		p.blind = true
		return nil, fmt.Errorf("describe task queue %s: %w", queue, err)
	}
	live := p.observe(resp.GetPollers(), p.now())
	p.report(queue, live)
	return live, nil
}

// observe records a listing made at now and returns the live others.
func (p *pollerWatch) observe(pollers []*taskqueuepb.PollerInfo, now time.Time) []peer {
	if p.blind {
		p.excuse(now.Sub(p.lastLook))
	}
	p.lastLook, p.blind = now, false
	listed := map[string]pollerActivity{}
	var live []peer
	for _, poller := range pollers {
		raw := poller.GetIdentity()
		activity := p.activity(raw, poller.GetLastAccessTime().AsTime(), now)
		listed[raw] = activity
		other := peerOf(raw)
		if other.id.store != p.self.store && now.Sub(activity.movedAt) < p.grace {
			live = append(live, other)
		}
	}
	p.seen = listed
	slices.SortFunc(live, func(a, b peer) int { return strings.Compare(a.raw, b.raw) })
	return live
}

// excuse moves every known poller's last move blind later: time in which
// the server may have let nobody poll proves nothing about a poller.
func (p *pollerWatch) excuse(blind time.Duration) {
	for raw, activity := range p.seen {
		activity.movedAt = activity.movedAt.Add(blind)
		p.seen[raw] = activity
	}
}

// activity is the poller's record after a listing at now.
func (p *pollerWatch) activity(raw string, access, now time.Time) pollerActivity {
	before, known := p.seen[raw]
	if known && before.access.Equal(access) {
		return before
	}
	return pollerActivity{access: access, movedAt: now}
}

// peerOf reads a listed identity; one Outpost did not write holds the site.
func peerOf(raw string) peer {
	id, ok := parseIdentity(raw)
	if !ok {
		id = daemonIdentity{role: roleActive}
	}
	return peer{raw: raw, id: id}
}

// report sets outpost_site_other_pollers and logs the live others when
// they change.
func (p *pollerWatch) report(queue string, live []peer) {
	names := make([]string, len(live))
	for i, o := range live {
		names[i] = o.raw
	}
	p.others.Set(float64(len(names)))
	if len(names) > 0 && !slices.Equal(names, p.reported) {
		p.log.Error("other daemons poll this site's task queue: site id "+p.self.site+" is configured on more than one daemon. "+
			"One acts for the site and the others wait (see their /readyz); give each site its own site.id, or stop the extra daemons",
			zap.String("taskQueue", queue), zap.String("self", p.self.String()), zap.Strings("others", names))
	}
	p.reported = names
}
