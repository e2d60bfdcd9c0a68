package sitedaemon

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-dev/outpost/internal/sitestore"
)

// The airgap_* metrics of a site. Exports and acks run in the CLI, a
// process of its own, which records each in the site file; the daemon
// reads them there at scrape time. Central serves the import side under
// the same names (workers/airgapmetrics.go).
var airgapDescs = struct{ exported, synced, offline, size, duration, clockRefused *prometheus.Desc }{
	exported: prometheus.NewDesc("airgap_bundles_exported_total",
		"Air-gap bundles written from this site file (outpost airgap export).", nil, nil),
	synced: prometheus.NewDesc("airgap_jobs_synced_total",
		"On a site: operations settled by air-gap receipts (outpost airgap ack), each counted by the receipt that settled it first.", nil, nil),
	offline: prometheus.NewDesc("airgap_offline_enqueues_total",
		"Operations that left this site by air-gap rather than by online hand-off: each job counted once, at the first export "+
			"that carries it, unless central had acknowledged it online by then.", nil, nil),
	size: prometheus.NewDesc("airgap_bundle_size_bytes",
		"On a site: sizes of the bundle files exported.", nil, nil),
	duration: prometheus.NewDesc("airgap_sync_duration_seconds",
		"Duration of air-gap operations, by operation: on a site export (read the job log, sign, write the file) "+
			"and ack (verify the receipt, settle what it names).", []string{"operation"}, nil),
	clockRefused: prometheus.NewDesc("airgap_clock_refusals_total",
		"Receipts whose time was more than the allowed clock offset (airgap ack --max-clock-offset) ahead of this node's clock: "+
			"refused, so this node's clock did not jump ahead. Above 0: check the clocks of the site and central.", nil, nil),
}

// airgapCollector reads the air-gap transfers recorded in the site store.
type airgapCollector struct {
	store *sitestore.Store
}

func (c *airgapCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{airgapDescs.exported, airgapDescs.synced, airgapDescs.offline, airgapDescs.size, airgapDescs.duration, airgapDescs.clockRefused} {
		ch <- d
	}
}

func (c *airgapCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	exports, err := c.store.TransferStats(ctx, sitestore.TransferExport)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(airgapDescs.exported, err)
		return
	}
	acks, err := c.store.TransferStats(ctx, sitestore.TransferAck)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(airgapDescs.synced, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(airgapDescs.exported, prometheus.CounterValue, float64(exports.Count))
	ch <- prometheus.MustNewConstMetric(airgapDescs.offline, prometheus.CounterValue, float64(exports.NewEntries))
	ch <- prometheus.MustNewConstMetric(airgapDescs.synced, prometheus.CounterValue, float64(acks.NewEntries))
	ch <- prometheus.MustNewConstMetric(airgapDescs.clockRefused, prometheus.CounterValue, float64(acks.ClockRefusals))
	ch <- prometheus.MustNewConstHistogram(airgapDescs.size, exports.Bytes.Count, exports.Bytes.Sum, exports.Bytes.Buckets)
	ch <- prometheus.MustNewConstHistogram(airgapDescs.duration, exports.Duration.Count, exports.Duration.Sum, exports.Duration.Buckets, sitestore.TransferExport)
	ch <- prometheus.MustNewConstHistogram(airgapDescs.duration, acks.Duration.Count, acks.Duration.Sum, acks.Duration.Buckets, sitestore.TransferAck)
}
