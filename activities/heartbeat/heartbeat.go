// Package heartbeat keeps a delivery attempt visibly alive while it works,
// so that Temporal retries an attempt whose worker died (SIGKILL, a lost
// host) within Timeout instead of waiting out the attempt's StartToClose
// timeout, which must be long enough for a slow SMTP relay or target. The
// central worker's delivery attempts and a site's cached-call attempts use
// it.
package heartbeat

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
)

const (
	// Timeout is the HeartbeatTimeout of an attempt: Temporal takes its
	// worker for gone when no heartbeat reached it for this long. Ten
	// seconds is five heartbeats (Every): a worker on a loaded machine, or
	// one whose heartbeat RPC is slow or retried, has eight seconds of slack
	// before it is declared dead, while a dead worker's attempt is retried
	// about as soon as a dead worker's workflow task is (also 10 s).
	Timeout = 10 * time.Second
	// Every is how often a working attempt heartbeats, from Every into it:
	// most attempts end sooner and cost no heartbeat at all. A worker must
	// send heartbeats at least this often (worker.Options'
	// MaxHeartbeatThrottleInterval): the SDK would otherwise batch them for
	// 0.8 × Timeout, leaving two seconds of slack.
	Every = 2 * time.Second
)

// While heartbeats the activity of ctx every Every until the returned stop
// is called, which the activity does before it returns:
//
//	defer heartbeat.While(ctx)()
//
// It does nothing outside an activity (the site's own retries), in a local
// activity (which cannot heartbeat: a dead worker's workflow task timeout
// recovers it), or for an attempt scheduled without a heartbeat timeout
// (workflows started before attempts heartbeated), where a heartbeat would
// be a billed RPC that nothing reads. A heartbeat refused because Temporal
// already timed the attempt out cancels ctx: the attempt's I/O stops.
func While(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	if info := activity.GetInfo(ctx); info.IsLocalActivity || info.HeartbeatTimeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(Every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	})
	// No heartbeat once the activity has returned: stop waits for the loop.
	return func() { close(done); wg.Wait() }
}
