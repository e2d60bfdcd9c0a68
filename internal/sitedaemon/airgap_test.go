package sitedaemon_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/airgap"
	"github.com/outpost-dev/outpost/internal/airgapsync"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/testutil"
	"github.com/outpost-dev/outpost/site"
)

// airgapSite is a site daemon with central down, and its site file opened
// a second time, as the CLI opens it from its own process to export and ack.
type airgapSite struct {
	daemon *sitedaemon.Daemon
	cli    *sitestore.Store
	opts   sitedaemon.Options
	dir    string
	ctx    context.Context
}

func startAirgapSite(t *testing.T, configure func(*sitedaemon.Options)) airgapSite {
	t.Helper()
	dir := t.TempDir()
	opts := sitedaemon.DefaultOptions()
	opts.Store, opts.Listen = filepath.Join(dir, "site.db"), "127.0.0.1:0"
	if configure != nil {
		configure(&opts)
	}
	d, ctx := sitedaemon.StartDaemonCentralDown(t, opts)
	cli, err := sitestore.Open(ctx, opts.Store, sitestore.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return airgapSite{daemon: d, cli: cli, opts: opts, dir: dir, ctx: ctx}
}

// notify sends a notification under each idempotency key and returns their ids.
func (s airgapSite) notify(t *testing.T, keys ...string) []string {
	t.Helper()
	var ids []string
	for _, key := range keys {
		id, err := s.daemon.Client.Send(s.ctx, site.Notification{List: "ops", Subject: key + " is low", IdempotencyKey: key})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}

// export writes a bundle of the node's unacknowledged log to name and
// returns it with the file's size on disk.
func (s airgapSite) export(t *testing.T, name string) (airgap.Bundle, int64) {
	t.Helper()
	path := filepath.Join(s.dir, name)
	b, err := airgapsync.Export(s.ctx, s.cli, airgapsync.ExportOptions{Site: s.opts.ID, Node: s.opts.Node, Now: time.Now().UTC(), Path: path})
	require.NoError(t, err)
	info, err := os.Stat(path)
	require.NoError(t, err)
	return b, info.Size()
}

// ack settles ids with an (unsigned) receipt from central, through its file.
func (s airgapSite) ack(t *testing.T, ids ...string) airgapsync.AckResult {
	t.Helper()
	return s.ackFrom(t, time.Now(), ids...)
}

// ackFrom is ack with a receipt written at createdAt by central's clock.
func (s airgapSite) ackFrom(t *testing.T, createdAt time.Time, ids ...string) airgapsync.AckResult {
	t.Helper()
	accepted := make([]airgap.Accepted, len(ids))
	for i, id := range ids {
		accepted[i] = airgap.Accepted{JobID: id, Kind: contract.KindNotification, Status: string(contract.StatusPending)}
	}
	return s.ackReceipt(t, createdAt, accepted...)
}

// ackReceipt settles a receipt written at createdAt naming accepted.
func (s airgapSite) ackReceipt(t *testing.T, createdAt time.Time, accepted ...airgap.Accepted) airgapsync.AckResult {
	t.Helper()
	path := filepath.Join(s.dir, "receipt.json")
	_, err := airgap.WriteFile(path, airgap.NewReceipt(s.opts.ID, createdAt, []string{"bundle"}, accepted, nil))
	require.NoError(t, err)
	receipt, err := airgapsync.ReadReceipt(path)
	require.NoError(t, err)
	res, err := airgapsync.Ack(s.ctx, s.cli, receipt, airgapsync.AckOptions{
		Verify: airgap.VerifyOptions{AllowUnsigned: true}, Site: s.opts.ID, Node: s.opts.Node, MaxClockOffset: time.Minute, Now: time.Now(),
	})
	require.NoError(t, err)
	return res
}

func (s airgapSite) jobLog(t *testing.T) []string {
	t.Helper()
	log, err := s.cli.ReadJobLog(s.ctx, s.opts.Node, nil)
	require.NoError(t, err)
	var ids []string
	for _, e := range log.Entries {
		ids = append(ids, e.JobID)
	}
	return ids
}

// The site's /metrics counts the exports and acks the CLI ran on its file:
// each job leaves by air-gap once however often it is exported, a receipt
// settling jobs again syncs nothing more, and the histograms hold every
// file's size and every operation's duration.
func TestSiteMetricsCountAirgapExportsAndAcks(t *testing.T) {
	t.Parallel()
	s := startAirgapSite(t, nil)
	started := time.Now()
	ids := s.notify(t, "tank-1", "tank-2", "tank-3")
	_, firstSize := s.export(t, "first.json")
	ids = append(ids, s.notify(t, "tank-4")...)
	_, secondSize := s.export(t, "second.json")
	require.Equal(t, 2, s.ack(t, ids[:2]...).Settled)
	require.Equal(t, 0, s.ack(t, ids[:2]...).Settled)
	require.NotEmpty(t, s.ackFrom(t, time.Now().Add(time.Hour), ids[2]).ClockRefused, "central's clock an hour ahead")
	took := time.Since(started).Seconds()

	m := testutil.ScrapeMetrics(t, "http://"+s.daemon.Addr()+"/metrics")
	require.Equal(t, 2.0, testutil.MetricValue(m, "airgap_bundles_exported_total", nil))
	require.Equal(t, 4.0, testutil.MetricValue(m, "airgap_offline_enqueues_total", nil), "three jobs, then one more: the second bundle carried the first three again")
	require.Equal(t, 3.0, testutil.MetricValue(m, "airgap_jobs_synced_total", nil), "the second receipt settled nothing new")
	require.Equal(t, 1.0, testutil.MetricValue(m, "airgap_clock_refusals_total", nil), "the receipt from an hour ahead")
	size := testutil.MetricHistogram(m, "airgap_bundle_size_bytes", nil)
	require.NotNil(t, size)
	require.Equal(t, uint64(2), size.GetSampleCount())
	require.Equal(t, float64(firstSize+secondSize), size.GetSampleSum(), "the files' sizes on disk")
	for operation, count := range map[string]uint64{"export": 2, "ack": 3} {
		d := testutil.MetricHistogram(m, "airgap_sync_duration_seconds", map[string]string{"operation": operation})
		require.NotNil(t, d, operation)
		require.Equal(t, count, d.GetSampleCount(), operation)
		require.Greater(t, d.GetSampleSum(), 0.0, operation)
		require.Less(t, d.GetSampleSum(), took, "%s: seconds, within the time the test spent", operation)
	}
}

// getNotification is the daemon's GET /v1/notifications/{id}.
func (s airgapSite) getNotification(t *testing.T, id string) contract.NotificationState {
	t.Helper()
	resp, err := http.Get("http://" + s.daemon.Addr() + "/v1/notifications/" + id)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	var st contract.NotificationState
	require.NoError(t, json.Unmarshal(body, &st))
	return st
}

// With central out of reach, the site answers a receipt's state for a
// notification it settled: the newest receipt's (an import of a later
// bundle finds central had delivered it), with the retry count and times
// it carries; an older receipt acked afterwards does not take it back.
func TestSiteAnswersTheNewestReceiptsState(t *testing.T) {
	t.Parallel()
	s := startAirgapSite(t, nil)
	ids := s.notify(t, "tank-1", "tank-2")
	s.export(t, "first.json")
	s.export(t, "again.json") // before the first receipt is back: central takes it as duplicates
	imported := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	pending := func(id string) airgap.Accepted {
		return airgap.Accepted{JobID: id, Kind: contract.KindNotification, Status: string(contract.StatusPending)}
	}
	require.Equal(t, 2, s.ackReceipt(t, imported, pending(ids[0]), pending(ids[1])).Settled)
	require.Equal(t, contract.StatusPending, s.getNotification(t, ids[0]).Status)

	attempted, delivered := imported.Add(time.Minute), imported.Add(2*time.Minute)
	res := s.ackReceipt(t, imported.Add(30*time.Minute),
		airgap.Accepted{JobID: ids[0], Kind: contract.KindNotification, Status: string(contract.StatusDelivered),
			RetryCount: 1, LastAttemptAt: &delivered, DeliveredAt: &delivered},
		airgap.Accepted{JobID: ids[1], Kind: contract.KindNotification, Status: string(contract.StatusRetrying),
			RetryCount: 2, LastAttemptAt: &attempted})
	require.Equal(t, 0, res.Settled, "both were settled by the first receipt")
	require.Equal(t, 2, res.AlreadySettled)

	st := s.getNotification(t, ids[0])
	require.Equal(t, contract.StatusDelivered, st.Status, "the newer receipt's state")
	require.Equal(t, 1, st.RetryCount)
	require.Equal(t, delivered, st.DeliveredAt.UTC())
	require.Equal(t, delivered, st.LastAttemptAt.UTC())
	st = s.getNotification(t, ids[1])
	require.Equal(t, contract.StatusRetrying, st.Status)
	require.Equal(t, 2, st.RetryCount)
	require.Equal(t, attempted, st.LastAttemptAt.UTC())
	require.Nil(t, st.DeliveredAt)

	s.ackReceipt(t, imported, pending(ids[0]))
	require.Equal(t, contract.StatusDelivered, s.getNotification(t, ids[0]).Status, "an older receipt acked late changes nothing")
}

// The daemon's purge prunes job-log entries a receipt settled once they are
// older than the retention, from the front of the chain only: an entry
// nobody acknowledged stays, and so does every entry behind it. What
// remains exports as a bundle that verifies from the checkpoint pruning
// left. A pruned operation's idempotency key is forgotten; the key of one
// still on the site is kept.
func TestDaemonPrunesSettledJobLogAndKeepsItVerifiable(t *testing.T) {
	t.Parallel()
	s := startAirgapSite(t, func(o *sitedaemon.Options) {
		o.TrackingRetention, o.PurgeInterval = time.Second, 100*time.Millisecond
	})
	ids := s.notify(t, "tank-1", "tank-2", "tank-3", "tank-4")
	s.export(t, "first.json")
	require.Equal(t, 3, s.ack(t, ids[0], ids[1], ids[3]).Settled, "tank-3 is not acknowledged")
	require.Equal(t, ids, s.jobLog(t), "settled entries stay for the retention: the site's status answers from them")

	require.Eventually(t, func() bool { return len(s.jobLog(t)) == 2 }, 10*time.Second, 50*time.Millisecond,
		"the settled front is pruned after the retention")
	time.Sleep(500 * time.Millisecond) // five more purges
	require.Equal(t, ids[2:], s.jobLog(t), "the unacknowledged entry stays, and the settled one behind it")

	b, _ := s.export(t, "after-pruning.json")
	require.NoError(t, airgap.Verify(b, airgap.VerifyOptions{AllowUnsigned: true}).Err())
	require.NotNil(t, b.JobLogs[0].Checkpoint, "the chain starts at the last pruned entry")
	require.Len(t, b.JobLogs[0].Entries, 2)
	require.Equal(t, ids[2], b.JobLogs[0].Entries[0].JobID)

	_, err := s.daemon.Client.Send(s.ctx, site.Notification{List: "ops", Subject: "another request", IdempotencyKey: "tank-3"})
	require.ErrorIs(t, err, site.ErrIdempotencyConflict, "an operation still on the site keeps its key")
	_, err = s.daemon.Client.Send(s.ctx, site.Notification{List: "ops", Subject: "another request", IdempotencyKey: "tank-1"})
	require.NoError(t, err, "a pruned operation's key is forgotten")
}
