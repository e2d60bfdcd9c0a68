package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/fromconfig"
	"github.com/outpost-dev/outpost/internal/linkproxy"
)

// wanRoundTrip is the round trip the WAN row's target is judged at; the
// others are reported beside it: a regional link and a satellite hop.
var (
	wanRoundTrip  = 300 * time.Millisecond
	wanRoundTrips = []time.Duration{30 * time.Millisecond, wanRoundTrip, 600 * time.Millisecond}
)

// wanTarget is the least the drain through the long link may reach of the
// same drain on loopback.
const wanTarget = 0.5

// wan drains WAN prefilled notifications through a link proxy in this
// process between the forwarder's Temporal client and a dev server with
// no worker, at each of wanRoundTrips, beside the same drain through the
// proxy with no delay in two halves, one before and one after, so a server
// that slows as it fills, or a machine that gets busier, weighs on both.
// The forwarder is wired as the daemon wires it (config defaults, the
// client made as the daemon makes it, the run's parallelism).
func (r *run) wan(ctx context.Context) (rows []Row, err error) {
	srv, err := r.startTemporal(ctx, SectionWAN)
	if err != nil {
		return nil, err
	}
	defer func() { err = joinStop(err, srv.stop()) }()
	proxy, err := linkproxy.Listen()
	if err != nil {
		return nil, err
	}
	defer proxy.Close()
	proxy.SetTarget(srv.addr)
	if err := r.warmUp(ctx, SectionWAN, srv.client()); err != nil {
		return nil, err
	}
	n := r.opts.WAN
	before, err := r.drainThrough(ctx, proxy, 0, n/2, "wan-loopback-before")
	if err != nil {
		return nil, err
	}
	rates := map[time.Duration]float64{}
	for _, rtt := range wanRoundTrips {
		took, err := r.drainThrough(ctx, proxy, rtt, n, fmt.Sprintf("wan-%s", rtt))
		if err != nil {
			return nil, err
		}
		rates[rtt] = perSecond(n, took)
	}
	after, err := r.drainThrough(ctx, proxy, 0, n-n/2, "wan-loopback-after")
	if err != nil {
		return nil, err
	}
	row := compare(SectionWAN, fmt.Sprintf("drain %s through a %s round trip", thousands(int64(n)), wanRoundTrip), rates[wanRoundTrip], "/s",
		Figure{Name: "the same drain on loopback", Value: perSecond(n, before+after), Unit: "/s"})
	return []Row{row.atLeastRatio(wanTarget).withDetail("%s; %s notifications each, from a forwarder starting at %d in flight, "+
		"the link's delay added to every chunk each way by a proxy in this process; loopback: half before (%.0f/s), half after (%.0f/s)",
		wanRates(rates), thousands(int64(n)), r.opts.Parallelism, perSecond(n/2, before), perSecond(n-n/2, after))}, nil
}

// wanRates lists the drain rate at each round trip.
func wanRates(rates map[time.Duration]float64) string {
	parts := make([]string, 0, len(wanRoundTrips))
	for _, rtt := range wanRoundTrips {
		parts = append(parts, fmt.Sprintf("%s: %.0f/s", rtt, rates[rtt]))
	}
	return "drain rate at a round trip of " + strings.Join(parts, ", ")
}

// drainThrough sets the proxy's round trip, then drains a fresh store of n
// notifications through it with a fresh client (a new connection) and
// returns how long that took.
func (r *run) drainThrough(ctx context.Context, proxy *linkproxy.Proxy, rtt time.Duration, n int, name string) (time.Duration, error) {
	proxy.SetRoundTrip(rtt)
	tc, err := r.siteClient(proxy.Addr())
	if err != nil {
		return 0, err
	}
	defer tc.Close()
	r.step("%s: drain %s notifications through a %s round trip", SectionWAN, thousands(int64(n)), rtt)
	took, err := r.forwardPrefilled(ctx, tc, name+"-site.db", n)
	if err != nil {
		return 0, fmt.Errorf("drain at a %s round trip: %w", rtt, err)
	}
	return took, nil
}

// siteClient is a Temporal client made as the site daemon makes its own
// (fromconfig.LazyTemporal) for the frontend at addr.
func (r *run) siteClient(addr string) (client.Client, error) {
	cfg := config.Default().Temporal
	cfg.Address, cfg.Namespace = addr, namespace
	return fromconfig.LazyTemporal(cfg, r.log.Named("wan-client"), nil)
}
