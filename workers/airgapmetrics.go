package workers

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outpost-dev/outpost/internal/airgap"
	"github.com/outpost-dev/outpost/internal/centralstore"
)

// The airgap_* metrics of central. Imports run in the CLI, a process of
// its own, which records each in the central store; the worker reads them
// there at scrape time. Sites serve the export side under the same names
// (internal/sitedaemon/airgapmetrics.go).
var airgapDescs = struct{ imported, synced, duplicates, conflicts, size, duration, entries *prometheus.Desc }{
	imported: prometheus.NewDesc("airgap_bundles_imported_total",
		"Air-gap bundles central imported (outpost airgap import); a bundle imported again is not counted again.", nil, nil),
	synced: prometheus.NewDesc("airgap_jobs_synced_total",
		"At central: operations central took from air-gap bundles (handed to their workflow or mirrored to site_calls).", nil, nil),
	duplicates: prometheus.NewDesc("airgap_duplicates_dropped_total",
		"Bundle entries central dropped on import as duplicates: a bundle imported again, an entry exported twice, "+
			"an operation that also arrived online.", nil, nil),
	conflicts: prometheus.NewDesc("airgap_merge_conflicts_total",
		"Conflicts that refused air-gap imports (nothing of such an import is taken), by type: payload_mismatch "+
			"(one job id, two payloads), kind_mismatch (one job id, two kinds).", []string{"type"}, nil),
	size: prometheus.NewDesc("airgap_bundle_size_bytes",
		"At central: sizes of the bundle files imported.", nil, nil),
	duration: prometheus.NewDesc("airgap_sync_duration_seconds",
		"Duration of air-gap operations, by operation: at central import (verify, merge, hand over), refused imports included.",
		[]string{"operation"}, nil),
	entries: prometheus.NewDesc("airgap_merge_entries_count",
		"Entries per air-gap import, its bundles merged into one order: imported, duplicate and skipped together, or refused.", nil, nil),
}

// airgapImportOperation is central's value of the operation label, beside
// a site's export and ack.
const airgapImportOperation = "import"

// airgapCollector reads the air-gap imports recorded in the central store.
type airgapCollector struct {
	store *centralstore.Store
}

func (c *airgapCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{airgapDescs.imported, airgapDescs.synced, airgapDescs.duplicates,
		airgapDescs.conflicts, airgapDescs.size, airgapDescs.duration, airgapDescs.entries} {
		ch <- d
	}
}

func (c *airgapCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.store.AirgapImportStats(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(airgapDescs.imported, err)
		return
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(airgapDescs.imported, st.Bundles)
	counter(airgapDescs.synced, st.Imported)
	counter(airgapDescs.duplicates, st.Duplicates)
	for _, kind := range conflictTypes(st.Conflicts) {
		counter(airgapDescs.conflicts, st.Conflicts[kind], strings.ReplaceAll(kind, "-", "_"))
	}
	ch <- prometheus.MustNewConstHistogram(airgapDescs.size, st.BundleBytes.Count, st.BundleBytes.Sum, st.BundleBytes.Buckets)
	ch <- prometheus.MustNewConstHistogram(airgapDescs.duration, st.Duration.Count, st.Duration.Sum, st.Duration.Buckets, airgapImportOperation)
	ch <- prometheus.MustNewConstHistogram(airgapDescs.entries, st.Entries.Count, st.Entries.Sum, st.Entries.Buckets)
}

// conflictTypes is every type airgap.Merge reports, so each series exists
// at 0 before its first conflict (rate() and alerts need it), and any other
// type recorded.
func conflictTypes(recorded map[string]int64) []string {
	types := []string{airgap.ConflictPayloadMismatch, airgap.ConflictKindMismatch}
	for kind := range recorded {
		if !slices.Contains(types, kind) {
			types = append(types, kind)
		}
	}
	return types
}
