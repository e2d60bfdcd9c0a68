package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
)

// pairFailoverAfter is the pairs' site.failover_after in these tests.
const (
	pairFailoverAfter = 2 * time.Second
	pairKills         = 5
	// pairClientPause spaces each client's posts: 64 clients offer about
	// 16 notifications a second, well within what a dev server delivers on 2
	// cores, so the test waits for delivery seconds, not minutes. For
	// pairHotBurst before each kill they post without pause: the kill
	// lands in a full burst, with batches and replication in flight.
	pairClientPause = 4 * time.Second
	pairHotBurst    = 100 * time.Millisecond
)

// A pair of `outpost site` processes under a 64-caller burst: the active
// node is SIGKILLed five times and restarted each time. The standby takes
// over within failover_after + 2 s each time, and every acknowledged
// notification is delivered exactly once (emails counted at the SMTP
// server): in sync mode because the standby had it when it was answered,
// in async mode because the killed node hands over what the other lacked
// when it comes back.
func TestPairSurvivesKillsOfTheActiveNode(t *testing.T) {
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) { testPairKills(t, mode) })
	}
}

func testPairKills(t *testing.T, mode string) {
	s := newStack(t, nil, withoutSite())
	t.Setenv("OUTPOST_E2E_PAIR_SECRET", "e2e-pair-secret")
	nodes := s.pairProcesses(mode)
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burstClients}, Timeout: 15 * time.Second}
	t.Cleanup(httpc.CloseIdleConnections)

	procs := [2]*siteProcess{nodes[0].start(), nodes[1].start()}
	active := waitActive(t, httpc, nodes, 10*time.Second)
	require.Equal(t, 0, active, "the preferred node becomes active")

	burst := startPairBurst(t, httpc, nodes, mode, false)
	var handedOver float64
	for kill := 1; kill <= pairKills; kill++ {
		time.Sleep(1500 * time.Millisecond)
		burst.hot.Store(true)
		time.Sleep(pairHotBurst)
		procs[active].kill()
		burst.hot.Store(false)
		killed := time.Now()
		next := 1 - active
		testutil.WaitFor(t, pairFailoverAfter+2*time.Second, func() bool { return nodes[next].role(httpc) == "active" },
			func() string { return fmt.Sprintf("kill %d: node %s did not take over", kill, nodes[next].node) })
		t.Logf("kill %d: %s took over %s after %s was killed", kill, nodes[next].node, time.Since(killed).Round(time.Millisecond), nodes[active].node)
		procs[active] = nodes[active].start()
		testutil.WaitFor(t, 30*time.Second, func() bool { return nodes[active].caughtUp(httpc) },
			func() string {
				return fmt.Sprintf("kill %d: the restarted %s does not follow", kill, nodes[active].node)
			})
		n := testutil.MetricValue(testutil.ScrapeMetrics(t, nodes[active].url+"/metrics"), "outpost_site_handed_over_operations_total", nil)
		handedOver += n
		active = next
	}
	acked := burst.stop()
	// The active node shows its peer as of the peer's last heartbeat (every
	// 400 ms here). The restarted node adopts epoch 6 from the active node's
	// heartbeat and reports it in its own next one, which can come after it
	// started following: wait for that report, then check the whole status.
	standbyAtEpoch6 := regexp.MustCompile(nodes[1-active].node + `\s+standby\s+6\s`)
	var out []byte
	var err error
	testutil.WaitFor(t, 5*time.Second, func() bool {
		out, err = exec.Command(nodes[active].bin, "site", "status", "--url", nodes[active].url).CombinedOutput()
		return err == nil && standbyAtEpoch6.Match(out)
	}, func() string {
		return fmt.Sprintf("the standby %s to report epoch 6; outpost site status (%v):\n%s", nodes[1-active].node, err, out)
	})
	t.Logf("outpost site status:\n%s", out)
	require.Regexp(t, nodes[active].node+`\s+active\s+6\s`, string(out), "the active node, at epoch 6 after five takeovers")
	require.Contains(t, string(out), "last failover to this node: 20")
	t.Logf("%s: %d notifications acknowledged over %d kills; %d handed over by restarted nodes", mode, len(acked), pairKills, int(handedOver))
	require.Greater(t, len(acked), 200, "too few acknowledged to prove a burst was under way at the kills")

	deliveryStarted := time.Now()
	requireDeliveredOnce(t, s, mode, acked, deliveryStarted)
}

// requireDeliveredOnce waits until every acknowledged notification was
// delivered, then checks none was delivered twice.
func requireDeliveredOnce(t *testing.T, s *stack, mode string, acked []string, since time.Time) {
	t.Helper()
	testutil.WaitFor(t, 6*time.Minute, func() bool {
		got := s.received()
		for _, id := range acked {
			if got[id] == 0 {
				return false
			}
		}
		return true
	}, func() string {
		got, missing := s.received(), 0
		for _, id := range acked {
			if got[id] == 0 {
				missing++
			}
		}
		return fmt.Sprintf("%d of %d acknowledged notifications not delivered", missing, len(acked))
	})
	t.Logf("%s: the last acknowledged notification was delivered %s after the burst", mode, time.Since(since).Round(time.Second))
	time.Sleep(2 * time.Second) // a duplicate would arrive about now
	got := s.received()
	for _, id := range acked {
		require.Equal(t, 1, got[id], "notification %s delivered once", id)
	}
}

// The link between the two nodes is cut for 30 s while both stay up and
// 64 clients post to both: the standby takes over, so both are active and
// both accept. Healed, exactly one stays active, the other hands over what
// it accepted and the active lacks, and every acknowledged notification
// is delivered once.
func TestPairPartitionHealsToOneActive(t *testing.T) {
	s := newStack(t, nil, withoutSite())
	t.Setenv("OUTPOST_E2E_PAIR_SECRET", "e2e-pair-secret")
	nodes := s.pairProcesses(config.ReplicationAsync)
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burstClients}, Timeout: 15 * time.Second}
	t.Cleanup(httpc.CloseIdleConnections)
	nodes[0].start()
	nodes[1].start()
	require.Equal(t, 0, waitActive(t, httpc, nodes, 10*time.Second))
	testutil.WaitFor(t, 30*time.Second, func() bool { return nodes[1].caughtUp(httpc) }, func() string { return "node-b does not follow" })

	nodes[0].link.Cut()
	nodes[1].link.Cut()
	testutil.WaitFor(t, pairFailoverAfter+2*time.Second, func() bool { return nodes[1].role(httpc) == "active" },
		func() string { return "node-b did not take over in the partition" })
	require.Equal(t, "active", nodes[0].role(httpc), "node-a, cut off, still takes work")
	burst := startPairBurst(t, httpc, nodes, "partition", true) // half the clients on each active node
	time.Sleep(30 * time.Second)
	nodes[0].link.Heal()
	nodes[1].link.Heal()
	var roles [2]string
	testutil.WaitFor(t, 10*time.Second, func() bool {
		roles = [2]string{nodes[0].role(httpc), nodes[1].role(httpc)}
		return roles == [2]string{"active", "standby"} || roles == [2]string{"standby", "active"}
	}, func() string { return fmt.Sprintf("after healing the roles are %v, want exactly one active", roles) })
	standby := 0
	if roles[1] == "standby" {
		standby = 1
	}
	testutil.WaitFor(t, time.Minute, func() bool { return nodes[standby].caughtUp(httpc) },
		func() string { return nodes[standby].node + " does not follow after healing" })
	acked := burst.stop()
	handedOver := testutil.MetricValue(testutil.ScrapeMetrics(t, nodes[standby].url+"/metrics"), "outpost_site_handed_over_operations_total", nil)
	t.Logf("partition: %d notifications acknowledged; %s stepped down and handed over %d", len(acked), nodes[standby].node, int(handedOver))
	require.Greater(t, len(acked), 200, "too few acknowledged to prove both nodes took work")
	require.Positive(t, handedOver, "the node that stepped down accepted work its peer lacked")
	requireDeliveredOnce(t, s, "partition", acked, time.Now())
}

// pairNode is one `outpost site` process of a pair.
type pairNode struct {
	t   *testing.T
	bin string // the outpost binary
	// link is how the other node reaches this one: cut it for a partition.
	link  *testutil.Proxy
	node  string
	url   string
	start func() *siteProcess
}

// pairProcesses configures the stack's site as a pair of child processes,
// node-a preferred, in replication mode, each reaching the other through
// a proxy (pairNode.link).
func (s *stack) pairProcesses(mode string) [2]*pairNode {
	s.t.Helper()
	bin := testutil.BuildOutpost(s.t)
	listens := [2]string{freeAddr(s.t), freeAddr(s.t)}
	links := [2]*testutil.Proxy{testutil.NewProxy(s.t), testutil.NewProxy(s.t)}
	var nodes [2]*pairNode
	for i, node := range []string{"node-a", "node-b"} {
		cfgFile := filepath.Join(s.dir, "pair-"+node+".yaml")
		require.NoError(s.t, os.WriteFile(cfgFile, fmt.Appendf(nil, `temporal: {address: %s}
site:
  id: %s
  node: %s
  store: %s
  listen: %s
  forward_interval: 1s
  peer: {address: "http://%s", secret_env: OUTPOST_E2E_PAIR_SECRET, prefer: %t}
  replication: %s
  failover_after: %s
log: {level: warn}
`, s.cfg.Temporal.Address, s.cfg.Site.ID, node, filepath.Join(s.dir, "pair-"+node+".db"), listens[i],
			links[1-i].Addr(), i == 0, mode, pairFailoverAfter), 0o644))
		links[i].SetTarget(listens[i])
		url := "http://" + listens[i]
		nodes[i] = &pairNode{t: s.t, bin: bin, link: links[i], node: node, url: url, start: func() *siteProcess {
			return startProcessUntil(s.t, bin, "site", cfgFile, url, &http.Client{Timeout: 5 * time.Second}, servesAsPairNode)
		}}
	}
	return nodes
}

// servesAsPairNode reports a /readyz answer of a node that serves: active
// or standby.
func servesAsPairNode(resp *http.Response) bool {
	var rd sitedaemon.Readiness
	return json.NewDecoder(resp.Body).Decode(&rd) == nil && (rd.Role == "active" || strings.HasPrefix(rd.Role, "standby"))
}

// role is the node's role as /readyz says it ("active", "standby"), or
// "down".
func (n *pairNode) role(httpc *http.Client) string {
	resp, err := httpc.Get(n.url + "/readyz")
	if err != nil {
		return "down"
	}
	defer resp.Body.Close()
	var rd sitedaemon.Readiness
	if json.NewDecoder(resp.Body).Decode(&rd) != nil {
		return "down"
	}
	return strings.SplitN(rd.Role, ":", 2)[0]
}

// caughtUp reports whether the node is a standby following the active
// node's stream (after any hand-over and resync), within a burst's lag.
func (n *pairNode) caughtUp(httpc *http.Client) bool {
	resp, err := httpc.Get(n.url + "/v1/pair")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st sitedaemon.PairStatus
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return false
	}
	return st.Following && st.LagChanges < 1000
}

// waitActive waits until one node is active and returns it.
func waitActive(t *testing.T, httpc *http.Client, nodes [2]*pairNode, within time.Duration) int {
	t.Helper()
	active := -1
	testutil.WaitFor(t, within, func() bool {
		for i, n := range nodes {
			if n.role(httpc) == "active" {
				active = i
				return true
			}
		}
		return false
	}, func() string { return "no node became active" })
	return active
}

// pairBurst is 64 clients posting notifications to whichever node takes
// them: a refusal (503 from the standby) or a cut connection sends the
// client to the other node.
type pairBurst struct {
	hot    atomic.Bool // post without pause
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  []string
}

// With split, half the clients start on each node.
func startPairBurst(t *testing.T, httpc *http.Client, nodes [2]*pairNode, mode string, split bool) *pairBurst {
	ctx, cancel := context.WithCancel(context.Background())
	b := &pairBurst{cancel: cancel}
	for c := range burstClients {
		var target atomic.Int32
		if split {
			target.Store(int32(c % 2))
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				at := int(target.Load())
				id, status, err := postNotification(ctx, httpc, nodes[at].url, site.Notification{
					List: "ops", Subject: fmt.Sprintf("pair %s %d/%d", mode, c, n), Body: strings.Repeat("b", burstBodyBytes),
				})
				switch {
				case err == nil && status == http.StatusAccepted:
					b.mu.Lock()
					b.acked = append(b.acked, id)
					b.mu.Unlock()
					b.pause(ctx)
				case errors.Is(err, context.Canceled):
					return
				default: // refused by a standby, or the node is gone: try the other
					target.CompareAndSwap(int32(at), int32(1-at))
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(func() { b.stop() })
	return b
}

// pause waits pairClientPause, or less when the burst turns hot.
func (b *pairBurst) pause(ctx context.Context) {
	for end := time.Now().Add(pairClientPause); time.Now().Before(end) && !b.hot.Load() && ctx.Err() == nil; {
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the burst and returns the acknowledged ids.
func (b *pairBurst) stop() []string {
	b.cancel()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.acked...)
}
