package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
)

// pacedPostInterval is how often each of the paced burst's two clients
// posts: ten notifications a second, which the cluster delivers as they
// come on a loaded 2-core machine, so the faults, not a backlog, decide
// what waits.
const pacedPostInterval = 200 * time.Millisecond

// On the self-hosted cluster (clients on node 0's frontend; the central
// store on a PostgreSQL of its own, sharing nothing with Temporal's), under
// a paced burst of notifications: node 1 is SIGKILLed (node 0 takes its
// shards) and restarted; then Temporal's PostgreSQL is stopped for 30 s
// and started again. The site API acknowledges (202) throughout; every
// acknowledged notification is delivered exactly once, counted at the SMTP
// server; the site's buffer drains; while the database is down the central
// worker's /readyz answers 503 naming what it waits for, and 200 once it
// is back.
func TestClusterFaultsUnderLoad(t *testing.T) {
	s := newStack(t, nil, onCluster(), withPostgresCentral())
	var acked []string

	burst := s.startPacedBurst("node kill")
	time.Sleep(5 * time.Second) // the burst is under way at the kill, by design
	require.NoError(t, s.cluster.Kill(1))
	t.Logf("node 1 killed")
	time.Sleep(10 * time.Second) // the burst goes on without node 1
	restart, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	require.NoError(t, s.cluster.Restart(restart, 1))
	t.Logf("node 1 restarted")
	time.Sleep(5 * time.Second)
	acked = append(acked, burst.stop()...)

	burst = s.startPacedBurst("database stop")
	time.Sleep(5 * time.Second)
	pg := s.cluster.Postgres()
	require.NoError(t, pg.Stop())
	down := time.Now()
	var answers []readyzAnswer
	for time.Since(down) < 30*time.Second {
		answers = append(answers, s.centralReadyz())
		time.Sleep(time.Second)
	}
	require.NoError(t, pg.Restart(restart))
	t.Logf("temporal's postgresql stopped for %s", time.Since(down).Round(time.Second))
	time.Sleep(5 * time.Second)
	acked = append(acked, burst.stop()...)
	requireReadyzNamedTheWait(t, answers)
	testutil.WaitFor(t, 2*time.Minute, func() bool { return s.centralReadyz().code == http.StatusOK },
		func() string { return fmt.Sprintf("central ready again: %+v", s.centralReadyz()) })

	testutil.WaitFor(t, 10*time.Minute, func() bool { return s.deliveredCount(acked) == len(acked) },
		func() string {
			return fmt.Sprintf("%d of %d acknowledged notifications delivered", s.deliveredCount(acked), len(acked))
		})
	s.waitStatus(contract.StatusDelivered, 5*time.Minute, acked...)
	received := s.received()
	for _, id := range acked {
		require.Equal(t, 1, received[id], "emails for %s", id)
	}
	testutil.WaitFor(t, time.Minute, func() bool {
		depth, err := s.daemon.Client.BufferDepth(t.Context())
		return err == nil && depth == 0
	}, func() string { return "the site's buffer drained" })
	t.Logf("%d acknowledged notifications delivered once each", len(acked))
}

// pacedBurst posts notifications to the stack's site from two clients, one
// every pacedPostInterval each, until stop.
type pacedBurst struct {
	t      *testing.T
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  []string
	failed []string
}

func (s *stack) startPacedBurst(name string) *pacedBurst {
	ctx, cancel := context.WithCancel(context.Background())
	b := &pacedBurst{t: s.t, cancel: cancel}
	httpc := &http.Client{Timeout: 30 * time.Second}
	for c := range 2 {
		b.wg.Go(func() {
			tick := time.NewTicker(pacedPostInterval)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				n := site.Notification{List: "ops", Subject: fmt.Sprintf("%s client %d #%d", name, c, i), Body: "pump 3", Script: "e2e-faults"}
				id, code, err := postNotification(ctx, httpc, s.siteURL, n)
				b.mu.Lock()
				switch {
				case code == http.StatusAccepted:
					b.acked = append(b.acked, id)
				case ctx.Err() == nil:
					b.failed = append(b.failed, fmt.Sprintf("%s: %d %v", n.Subject, code, err))
				}
				b.mu.Unlock()
			}
		})
	}
	return b
}

// stop ends the burst, requires that the site acknowledged every post, and
// returns the ids it acknowledged.
func (b *pacedBurst) stop() []string {
	b.t.Helper()
	b.cancel()
	b.wg.Wait()
	require.Empty(b.t, b.failed, "the site acknowledges every notification whatever Temporal does")
	require.NotEmpty(b.t, b.acked)
	b.t.Logf("burst: %d acknowledged", len(b.acked))
	return b.acked
}

// deliveredCount counts the ids the SMTP server received.
func (s *stack) deliveredCount(ids []string) int {
	received := s.received()
	n := 0
	for _, id := range ids {
		if received[id] > 0 {
			n++
		}
	}
	return n
}

// readyzAnswer is one answer of central's /readyz.
type readyzAnswer struct {
	code int
	body string
}

func (s *stack) centralReadyz() readyzAnswer {
	s.t.Helper()
	resp, err := http.Get(s.centralURL + "/readyz")
	require.NoError(s.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return readyzAnswer{code: resp.StatusCode, body: strings.TrimSpace(string(body))}
}

// requireReadyzNamedTheWait checks that, while Temporal's database was
// down, central's /readyz answered 503 saying it waits for Temporal's
// persistence, and never claimed to be ready.
func requireReadyzNamedTheWait(t *testing.T, answers []readyzAnswer) {
	t.Helper()
	named := 0
	for _, a := range answers[1:] { // the first, taken as the database stopped, may predate the servers noticing
		require.NotEqual(t, http.StatusOK, a.code, "central /readyz while Temporal's database is down: %q", a.body)
		if strings.Contains(a.body, "temporal") && strings.Contains(a.body, "database") {
			named++
		}
	}
	t.Logf("central /readyz while the database was down (first and last): %+v … %+v", answers[0], answers[len(answers)-1])
	require.NotZero(t, named, "central /readyz names Temporal's database as what it waits for: %+v", answers)
}
