package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/sqlitedb"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
)

// Burst shape: enough concurrent callers that a group-commit writer always
// has a batch open when the process dies.
const (
	crashCycles    = 6
	burstClients   = 64
	burstBodyBytes = 512
	// minAcknowledged over all cycles proves bursts were under way at the
	// kills; a 2-core machine acknowledges several times this many.
	minAcknowledged = 1000
)

// TestSiteKilledMidBurstLosesNoAcknowledgedOperation SIGKILLs the real site
// daemon while 64 clients post notifications, restarts it on the same store,
// and checks that every notification answered 202 is still in the buffer.
// Central is unreachable throughout, so nothing leaves the buffer. Not
// parallel: the acknowledged floor assumes the machine's cores are ours.
func TestSiteKilledMidBurstLosesNoAcknowledgedOperation(t *testing.T) {
	bin := testutil.BuildOutpost(t)
	dir := t.TempDir()
	store := filepath.Join(dir, "site.db")
	listen := freeAddr(t)
	cfgFile := filepath.Join(dir, "outpost.yaml")
	// Nothing listens at the Temporal address: every hand-off fails and
	// every row stays buffered.
	cfg := fmt.Sprintf("temporal:\n  address: %s\nsite:\n  id: crash-1\n  store: %s\n  listen: %s\nlog:\n  level: error\n",
		freeAddr(t), store, listen)
	require.NoError(t, os.WriteFile(cfgFile, []byte(cfg), 0o644))
	out, err := exec.Command(bin, "config", "check", cfgFile).CombinedOutput()
	require.NoError(t, err, "outpost config check:\n%s", out)

	baseURL := "http://" + listen
	httpc := &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: burstClients},
		Timeout:   15 * time.Second, // longer than the store's busy timeout
	}
	t.Cleanup(httpc.CloseIdleConnections)

	acked := map[string]int{} // id → cycle that acknowledged it
	proc := startSiteProcess(t, bin, cfgFile, baseURL, httpc)
	for cycle := 1; cycle <= crashCycles; cycle++ {
		killAfter := 200*time.Millisecond + rand.N(600*time.Millisecond)
		res := burstUntilKilled(t, proc, httpc, baseURL, cycle, killAfter)
		require.NotEmpty(t, res.acked, "cycle %d: nothing acknowledged before the kill", cycle)
		require.NotZero(t, res.failed, "cycle %d: no request was cut by the kill", cycle)
		for _, id := range res.acked {
			_, dup := acked[id]
			require.False(t, dup, "id %s acknowledged twice", id)
			acked[id] = cycle
		}
		proc = startSiteProcess(t, bin, cfgFile, baseURL, httpc)
		depth := checkBuffered(t, store, acked)
		checkForwardingViaAPI(t, httpc, baseURL, res.acked)
		t.Logf("cycle %d: killed after %s: %d acknowledged (%d in total); %d unanswered after the kill, %d before, non-202 %v; buffer depth %d after restart",
			cycle, killAfter.Round(time.Millisecond), len(res.acked), len(acked), res.failed, res.early, res.rejected, depth)
	}
	t.Logf("%d notifications acknowledged over %d kills, none lost", len(acked), crashCycles)
	require.Greater(t, len(acked), minAcknowledged, "too few acknowledged notifications to prove a burst was under way at the kills")
}

// siteProcess is an `outpost` daemon (site or central) in a child process,
// so the test can SIGKILL it the way the OOM killer would. (A kill loses no
// written page, unlike a power cut: this proves the daemon answers only
// after commit, not fsync.)
type siteProcess struct {
	cmd    *exec.Cmd
	out    *testutil.SyncBuffer
	exited chan struct{}
}

// startSiteProcess runs the site daemon and waits until /readyz answers 200.
func startSiteProcess(t *testing.T, bin, cfgFile, baseURL string, httpc *http.Client) *siteProcess {
	t.Helper()
	return startProcess(t, bin, "site", cfgFile, baseURL, httpc)
}

// startProcess runs `outpost <command> --config cfgFile` and waits until
// baseURL/readyz answers 200. The process is killed when the test ends; its
// output is logged if the test failed.
func startProcess(t *testing.T, bin, command, cfgFile, baseURL string, httpc *http.Client) *siteProcess {
	t.Helper()
	return startProcessUntil(t, bin, command, cfgFile, baseURL, httpc, func(resp *http.Response) bool {
		return resp.StatusCode == http.StatusOK
	})
}

// startProcessUntil is startProcess waiting until up says yes to an
// answer of baseURL/readyz.
func startProcessUntil(t *testing.T, bin, command, cfgFile, baseURL string, httpc *http.Client, up func(*http.Response) bool) *siteProcess {
	t.Helper()
	p, err := tryStartProcess(t, bin, command, cfgFile, baseURL, httpc, up)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startProcessSupervised is startProcess as systemd's Restart=on-failure
// runs the daemon: a process that exits before it is ready (a start-up
// call to an overloaded Temporal failing) is started again, up to five
// times.
func startProcessSupervised(t *testing.T, bin, command, cfgFile, baseURL string, httpc *http.Client) *siteProcess {
	t.Helper()
	ready := func(resp *http.Response) bool { return resp.StatusCode == http.StatusOK }
	for range 4 {
		p, err := tryStartProcess(t, bin, command, cfgFile, baseURL, httpc, ready)
		if err == nil {
			return p
		}
		t.Logf("restarting, as its supervisor would: %v", err)
	}
	return startProcessUntil(t, bin, command, cfgFile, baseURL, httpc, ready)
}

// tryStartProcess is startProcessUntil returning an error when the process
// exits before it is ready.
func tryStartProcess(t *testing.T, bin, command, cfgFile, baseURL string, httpc *http.Client, up func(*http.Response) bool) (*siteProcess, error) {
	t.Helper()
	p := &siteProcess{cmd: exec.Command(bin, command, "--config", cfgFile), out: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() && p.out.String() != "" {
			t.Logf("outpost %s (pid %d) output:\n%s", command, p.cmd.Process.Pid, p.out.String())
		}
	})
	var exited error
	testutil.WaitFor(t, 30*time.Second, func() bool {
		select {
		case <-p.exited:
			exited = fmt.Errorf("outpost %s exited before it was ready: %v\n%s", command, p.cmd.ProcessState, p.out.String())
			return true
		default:
		}
		resp, err := httpc.Get(baseURL + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return up(resp)
	}, func() string { return "outpost " + command + " /readyz at " + baseURL })
	return p, exited
}

// kill SIGKILLs the process and reaps it; a no-op once it exited.
func (p *siteProcess) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// burstResult is what one burst's clients saw.
type burstResult struct {
	// acked are the ids answered 202: committed, by the API's contract.
	acked []string
	// failed counts requests that got no answer after the kill.
	failed int64
	// early counts requests that got no usable answer before the kill.
	early int64
	// rejected counts answers other than 202, by status code.
	rejected map[int]int
}

// burstUntilKilled posts notifications from burstClients goroutines as fast
// as they are answered and SIGKILLs the daemon killAfter into the burst.
func burstUntilKilled(t *testing.T, p *siteProcess, httpc *http.Client, baseURL string, cycle int, killAfter time.Duration) burstResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu     sync.Mutex
		res    = burstResult{rejected: map[int]int{}}
		failed atomic.Int64
		early  atomic.Int64
		killed atomic.Bool
		wg     sync.WaitGroup
	)
	body := strings.Repeat("pressure low on pump 3; ", burstBodyBytes/24+1)[:burstBodyBytes]
	for w := range burstClients {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				n := site.Notification{List: "ops", Subject: fmt.Sprintf("crash cycle %d client %d #%d", cycle, w, i), Body: body, Script: "e2e-crash"}
				id, status, err := postNotification(ctx, httpc, baseURL, n)
				mu.Lock()
				switch {
				case err != nil && killed.Load():
					failed.Add(1)
				case err != nil:
					early.Add(1)
				case status == http.StatusAccepted:
					res.acked = append(res.acked, id)
				default:
					res.rejected[status]++
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(killAfter) // the kill lands at a random point of the burst, by design
	killed.Store(true)
	p.kill()
	cancel()
	wg.Wait()
	httpc.CloseIdleConnections() // they were to the dead process
	res.failed, res.early = failed.Load(), early.Load()
	return res
}

// postNotification posts n; id is set only for a 202 whose body was read whole.
func postNotification(ctx context.Context, httpc *http.Client, baseURL string, n site.Notification) (id string, status int, err error) {
	data, err := json.Marshal(n)
	if err != nil {
		return "", 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/notifications", bytes.NewReader(data))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return "", resp.StatusCode, nil
	}
	var acc sitedaemon.Accepted
	if err := json.NewDecoder(resp.Body).Decode(&acc); err != nil {
		return "", 0, fmt.Errorf("read 202 answer: %w", err)
	}
	if acc.ID == "" || acc.Status != "Forwarding" {
		return "", 0, fmt.Errorf("202 answer without an id or not Forwarding: %+v", acc)
	}
	return acc.ID, resp.StatusCode, nil
}

// checkBuffered opens the store beside the restarted daemon, as a script
// would, checks the file is intact and holds every acknowledged notification,
// and returns its depth.
func checkBuffered(t *testing.T, path string, acked map[string]int) int {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, path)
	require.NoError(t, err, "open the site file after a kill")
	defer db.Close()
	var integrity string
	require.NoError(t, db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&integrity))
	require.Equal(t, "ok", integrity, "integrity check of the site file after a kill")

	// No Temporal client: Status answers only from the buffer.
	c, err := site.Open(ctx, path, site.Options{SiteID: "crash-1"})
	require.NoError(t, err, "the site store must open cleanly after a kill")
	defer c.Close()
	missing := map[int][]string{} // cycle that acknowledged them → ids
	lost := 0
	for id, cycle := range acked {
		st, err := c.Status(ctx, id)
		if err != nil || st.Status != contract.StatusForwarding {
			missing[cycle] = append(missing[cycle], fmt.Sprintf("%s (%s, %v)", id, st.Status, err))
			lost++
		}
	}
	require.Zero(t, lost, "%d of %d acknowledged notifications are not in the site buffer; by the cycle that acknowledged them: %v", lost, len(acked), missing)
	var depth int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM buffer`).Scan(&depth))
	return depth
}

// checkForwardingViaAPI asks the restarted daemon about a sample of the
// cycle's acknowledged ids: each must be Forwarding (still buffered).
func checkForwardingViaAPI(t *testing.T, httpc *http.Client, baseURL string, ids []string) {
	t.Helper()
	const sample = 32
	for i, id := range ids {
		if len(ids) > sample && i%(len(ids)/sample) != 0 {
			continue
		}
		resp, err := httpc.Get(baseURL + "/v1/notifications/" + id)
		require.NoError(t, err)
		var st contract.NotificationState
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET /v1/notifications/%s", id)
		require.NoError(t, err)
		require.Equal(t, contract.StatusForwarding, st.Status, "GET /v1/notifications/%s", id)
	}
}
