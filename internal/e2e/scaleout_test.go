package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/smtpsink"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
)

// Two `outpost central` processes share one PostgreSQL central store (each
// its own config and folder, as on two hosts). The SMTP server refuses
// every message after DATA and the target answers 503 while notifications
// and cached calls arrive, so items are retried (those still being handed
// off at the recovery may go through at once); the worker that has sent
// the most attempts is SIGKILLed twice while they fail, then both recover
// and the busier one is SIGKILLed a third time while the retries deliver
// (restarted each time, as systemd would, again if it exits at start-up).
// Each kill must land while items were undelivered. Every item is
// delivered exactly once, but for an email whose worker the third kill
// cut off after the SMTP server accepted it and before the worker recorded
// it: SMTP cannot say whether it has a message, so its retry sends it
// again (lostWithItsWorker; the first CI run at full speed had one). No
// two attempts of one notification ever ran at once (the SMTP server records each attempt's worker, from the email's
// X-Outpost-Worker, and when it began and ended); every notification's
// audit trail is whole; the KPIs count every item delivered and nothing
// queued; the site's buffer is empty. Cached calls' attempts run on the
// site's worker, so they cannot overlap across central workers: they are
// counted at the target, once each.
func TestTwoCentralWorkersDeliverOnceThroughKills(t *testing.T) {
	const notes, calls = 2000, 500
	s := newStack(t, func(c *config.Config) {
		c.Central.SMTP.RetryInterval, c.Central.SMTP.MaxRetries = 3*time.Second, 1000
		erp := c.Site.ExternalSystems["erp"]
		erp.RetryInterval, erp.MaxRetries = 3*time.Second, 1000
		c.Site.ExternalSystems["erp"] = erp
	}, withoutCentral(), withPostgresCentral())
	sink := s.sinks[0]
	sink.RejectData(451, "relay busy, try again later")
	s.demo.FailNext(math.MaxInt32, http.StatusServiceUnavailable)
	workers := []*supervisedWorker{{start: s.supervisedCentralProcess()}, {start: s.supervisedCentralProcess()}}
	for _, w := range workers {
		w.p = w.start()
	}

	began := time.Now()
	ids, skus := s.postLoad(notes, calls)
	t.Logf("%d notifications and %d cached calls acknowledged in %s", notes, calls, time.Since(began).Round(time.Second))

	// kill SIGKILLs the busier worker once ready(stats) holds, checks that
	// items were still undelivered, and starts it again. The busier one,
	// not a fixed one: a worker restarted after the other took over its
	// workflows (each sticks to the worker that ran its last task) may
	// get no attempts to send.
	var kills []workerKill
	kill := func(n int, ready func(attemptStats) bool) {
		t.Helper()
		var victim *supervisedWorker
		testutil.WaitFor(t, 5*time.Minute, func() bool {
			at := countAttempts(sink, ids)
			victim = busiest(workers, at)
			return ready(at) && victim != nil
		}, func() string { return fmt.Sprintf("kill %d: attempts so far %+v", n, countAttempts(sink, ids)) })
		kills = append(kills, workerKill{worker: victim.p.workerPrefix(), at: time.Now()})
		victim.p.kill()
		at := countAttempts(sink, ids)
		require.NotZero(t, at.undelivered, "kill %d: it landed while items were being retried", n)
		t.Logf("kill %d of the worker with pid %s after %s (it had sent %d attempts): %+v", n, victim.p.workerPrefix(),
			time.Since(began).Round(time.Second), at.byWorker[victim.p.workerPrefix()], at.summary())
		victim.p = victim.start()
	}
	kill(1, func(at attemptStats) bool { return at.retried >= notes/4 })
	first := countAttempts(sink, ids).total
	kill(2, func(at attemptStats) bool { return at.total >= first+notes/2 })
	sink.RejectData(0, "")
	s.demo.Recover()
	kill(3, func(at attemptStats) bool { return at.delivered >= notes/10 })

	testutil.WaitFor(t, 10*time.Minute, func() bool { return countAttempts(sink, ids).delivered == notes },
		func() string {
			return fmt.Sprintf("every notification delivered: %+v", countAttempts(sink, ids).summary())
		})
	s.waitStatus(contract.StatusDelivered, 5*time.Minute, ids...)
	for _, id := range skus {
		s.waitOperation(id, contract.StatusDelivered, 5*time.Minute)
	}
	t.Logf("all delivered %s after the first post: %+v", time.Since(began).Round(time.Second), countAttempts(sink, ids).summary())

	resent := requireNoOverlappingAttempts(t, sink, ids, kills)
	t.Logf("%d emails sent again after their worker was killed between the SMTP server's acceptance and its record of it", len(resent))
	received := s.received()
	for _, id := range ids {
		require.Equal(t, 1+resent[id], received[id], "emails for %s", id)
	}
	for i := range calls {
		require.Equal(t, 1, s.successesFor(fmt.Sprintf("scale-%d", i)), "call scale-%d reached the target once", i)
	}
	s.requireWholeAuditTrails(sink, ids)
	// A call's Delivered reaches central's site_calls in the site's next
	// telemetry batch (within site.telemetry_delay of the change, once
	// the batch before it is known written): the KPIs count the calls once
	// it has arrived.
	var kpis centralstore.KPIReport
	testutil.WaitFor(t, time.Minute, func() bool {
		var err error
		kpis, err = s.centralStore().KPIs(t.Context(), centralstore.KPIQuery{Now: time.Now(), StuckAge: time.Hour, Window: time.Hour})
		require.NoError(t, err)
		return kpis.Global.Kind(contract.KindExternalCall).Delivered == calls
	}, func() string {
		return fmt.Sprintf("central's KPIs count %d of %d cached calls delivered", kpis.Global.Kind(contract.KindExternalCall).Delivered, calls)
	})
	for kind, want := range map[string]int{contract.KindNotification: notes, contract.KindExternalCall: calls} {
		k := kpis.Global.Kind(kind)
		require.Equal(t, want, k.Delivered, "%s delivered in the last hour", kind)
		require.Zero(t, k.Queue, "%s queued", kind)
		require.Zero(t, k.Parked, "%s parked", kind)
	}
	depth, err := s.daemon.Client.BufferDepth(t.Context())
	require.NoError(t, err)
	require.Zero(t, depth, "the site's buffer drained")
}

// postLoad posts notes notifications and calls cached calls (sku
// scale-<i>) to the site API from 16 clients and returns the ids of both,
// each answered 202.
func (s *stack) postLoad(notes, calls int) (noteIDs, callIDs []string) {
	s.t.Helper()
	noteIDs, callIDs = make([]string, notes), make([]string, calls)
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: 30 * time.Second}
	defer httpc.CloseIdleConnections()
	var g errgroup.Group
	g.SetLimit(16)
	for i := range notes {
		g.Go(func() error {
			n := site.Notification{List: "ops", Subject: fmt.Sprintf("scale-out %d", i), Body: "pump 3", Script: "e2e-scale"}
			id, code, err := postNotification(s.t.Context(), httpc, s.siteURL, n)
			if err == nil && code != http.StatusAccepted {
				err = fmt.Errorf("notification %d answered %d", i, code)
			}
			noteIDs[i] = id
			return err
		})
	}
	for i := range calls {
		g.Go(func() error {
			var res site.CallResult
			req := site.CallRequest{System: "erp", Method: "createOrder", Params: map[string]any{"sku": fmt.Sprintf("scale-%d", i)}, Script: "e2e-scale"}
			code, err := postJSON(s.t.Context(), httpc, s.siteURL+"/v1/calls", req, &res)
			if err == nil && code != http.StatusAccepted {
				err = fmt.Errorf("call %d answered %d: %s", i, code, res.Error)
			}
			callIDs[i] = res.ID
			return err
		})
	}
	require.NoError(s.t, g.Wait())
	return noteIDs, callIDs
}

// postJSON posts body and decodes the answer into out.
func postJSON(ctx context.Context, httpc *http.Client, url string, body, out any) (int, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
}

// supervisedWorker is an `outpost central` process and what starts it
// again after a kill.
type supervisedWorker struct {
	start func() *siteProcess
	p     *siteProcess
}

// busiest is the worker that has sent the most attempts, nil while none
// has sent any.
func busiest(workers []*supervisedWorker, at attemptStats) *supervisedWorker {
	var most *supervisedWorker
	for _, w := range workers {
		if n := at.byWorker[w.p.workerPrefix()]; n > 0 && (most == nil || n > at.byWorker[most.p.workerPrefix()]) {
			most = w
		}
	}
	return most
}

// workerPrefix is how the identity of this `outpost central` process
// begins (pid@host@task queue).
func (p *siteProcess) workerPrefix() string { return fmt.Sprintf("%d@", p.cmd.Process.Pid) }

// attemptStats sums the SMTP server's attempts of a test's notifications.
type attemptStats struct {
	total, delivered int
	// retried counts notifications with more than one attempt.
	retried int
	// undelivered counts notifications attempted and not yet accepted.
	undelivered int
	// byWorker counts attempts by worker pid prefix ("1234@").
	byWorker map[string]int
}

func (a attemptStats) summary() string {
	return fmt.Sprintf("%d attempts, %d delivered, %d retried, %d attempted and undelivered, %d workers",
		a.total, a.delivered, a.retried, a.undelivered, len(a.byWorker))
}

func countAttempts(sink *smtpsink.Sink, ids []string) attemptStats {
	ours := make(map[string]bool, len(ids))
	for _, id := range ids {
		ours[id] = true
	}
	st := attemptStats{byWorker: map[string]int{}}
	perItem, accepted := map[string]int{}, map[string]bool{}
	for _, a := range sink.Attempts() {
		if !ours[a.NotificationID] {
			continue
		}
		st.total++
		perItem[a.NotificationID]++
		accepted[a.NotificationID] = accepted[a.NotificationID] || a.Accepted
		pid, _, _ := bytes.Cut([]byte(a.Worker), []byte("@"))
		st.byWorker[string(pid)+"@"]++
	}
	for id, n := range perItem {
		if n > 1 {
			st.retried++
		}
		if accepted[id] {
			st.delivered++
		} else {
			st.undelivered++
		}
	}
	return st
}

// workerKill is a SIGKILL of the central worker whose identity begins
// with worker.
type workerKill struct {
	worker string
	at     time.Time
}

// lostWithItsWorker reports whether accepted, an attempt the SMTP server
// accepted, was cut off from its record by a kill: its worker was killed
// after the server accepted it, and next, the notification's next
// attempt, began after that kill. Only such an email may be sent twice.
func lostWithItsWorker(accepted, next smtpsink.Attempt, kills []workerKill) bool {
	for _, k := range kills {
		if strings.HasPrefix(accepted.Worker, k.worker) && accepted.End.Before(k.at) && next.Start.After(k.at) {
			return true
		}
	}
	return false
}

// requireNoOverlappingAttempts checks, for each notification, that every
// attempt named its worker, that one was accepted (or two, the first
// lostWithItsWorker), and that no two were open at the SMTP server at
// once; that at least a quarter of them were refused first; and that
// attempts came from several workers. It returns the notifications sent
// twice, with 1 each.
func requireNoOverlappingAttempts(t *testing.T, sink *smtpsink.Sink, ids []string, kills []workerKill) (resent map[string]int) {
	t.Helper()
	byID := map[string][]smtpsink.Attempt{}
	workers := map[string]bool{}
	for _, a := range sink.Attempts() {
		byID[a.NotificationID] = append(byID[a.NotificationID], a)
		workers[a.Worker] = true
	}
	overlaps, retried := 0, 0
	resent = map[string]int{}
	for _, id := range ids {
		attempts := byID[id]
		slices.SortFunc(attempts, func(x, y smtpsink.Attempt) int { return x.Start.Compare(y.Start) })
		accepted, first := 0, -1 // first: the first attempt accepted
		for i, a := range attempts {
			require.NotEmpty(t, a.Worker, "%s: attempt %d names no worker", id, i)
			switch {
			case a.Accepted && first >= 0 && resent[id] == 0 && lostWithItsWorker(attempts[first], attempts[first+1], kills):
				resent[id] = 1
			case a.Accepted:
				accepted++
				if first < 0 {
					first = i
				}
			}
			if i > 0 && a.Start.Before(attempts[i-1].End) {
				overlaps++
				t.Errorf("%s: attempt by %s [%s, %s] began before the attempt by %s ended [%s, %s]", id,
					a.Worker, a.Start.Format(time.StampMicro), a.End.Format(time.StampMicro),
					attempts[i-1].Worker, attempts[i-1].Start.Format(time.StampMicro), attempts[i-1].End.Format(time.StampMicro))
			}
		}
		require.Equal(t, 1, accepted, "%s: accepted attempts", id)
		if len(attempts) > 1 {
			retried++
		}
	}
	require.Zero(t, overlaps, "attempts of one notification open at once")
	// Those handed off after the recovery may go through at once; most
	// were refused first.
	require.GreaterOrEqual(t, retried, len(ids)/4, "notifications refused before they were accepted")
	require.GreaterOrEqual(t, len(workers), 3, "attempts came from the three workers killed, each busy when it was: %v", workers)
	return resent
}

// requireWholeAuditTrails checks each notification's audit trail: one
// Enqueued, one delivered Attempt, one Terminal Delivered, and a failed
// Attempt for each attempt the SMTP server refused (the workflow records
// each failed attempt, refused or timed out with its worker killed; an
// attempt killed before it reached the server adds one more).
func (s *stack) requireWholeAuditTrails(sink *smtpsink.Sink, ids []string) {
	s.t.Helper()
	refusedAt := map[string]int{}
	for _, a := range sink.Attempts() {
		if !a.Accepted {
			refusedAt[a.NotificationID]++
		}
	}
	store := s.centralStore()
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(8)
	for _, id := range ids {
		g.Go(func() error {
			events, err := store.ListAuditEvents(s.t.Context(), id)
			if err != nil {
				return err
			}
			counts := map[string]int{}
			for _, e := range events {
				counts[string(e.Event)+" "+string(e.Status)]++
			}
			mu.Lock()
			defer mu.Unlock()
			refused := 0 // failed attempts
			for key, n := range counts {
				if key != "Attempt Delivered" && strings.HasPrefix(key, "Attempt ") {
					refused += n
				}
			}
			if counts["Enqueued Pending"] != 1 || counts["Attempt Delivered"] != 1 || counts["Terminal Delivered"] != 1 || refused < refusedAt[id] {
				return fmt.Errorf("%s: audit trail %v, %d attempts refused at the SMTP server", id, counts, refusedAt[id])
			}
			return nil
		})
	}
	require.NoError(s.t, g.Wait())
}

// Notifications that arrive while many others are retried faster than the
// central worker can attempt them still get their first attempts soon.
// Each retry's workflow task goes to the worker's own sticky queue, the
// newcomers' first tasks to the shared queue; the SDK's default pollers
// poll only the sticky queue while it has a backlog, and with 2,000
// notifications retrying every 3 s the newcomers waited for minutes
// (246 of 2,000 attempted after 5 minutes).
func TestNewNotificationsAreNotStarvedByRetries(t *testing.T) {
	s := newStack(t, func(c *config.Config) {
		c.Central.SMTP.RetryInterval, c.Central.SMTP.MaxRetries = 50*time.Millisecond, 1_000_000
	})
	sink := s.sinks[0]
	sink.RejectData(451, "relay busy, try again later")
	retrying, _ := s.postLoad(200, 0)
	testutil.WaitFor(t, 3*time.Minute, func() bool { return countAttempts(sink, retrying).retried >= 100 },
		func() string {
			return fmt.Sprintf("100 notifications retrying: %s", countAttempts(sink, retrying).summary())
		})

	began := time.Now()
	late, _ := s.postLoad(20, 0)
	testutil.WaitFor(t, time.Minute, func() bool { return countAttempts(sink, late).undelivered == len(late) },
		func() string {
			return fmt.Sprintf("a first attempt of each of %d new notifications while %s: %s",
				len(late), countAttempts(sink, retrying).summary(), countAttempts(sink, late).summary())
		})
	t.Logf("the %d new notifications' first attempts within %s, while the others made %s",
		len(late), time.Since(began).Round(time.Millisecond), countAttempts(sink, retrying).summary())
}
