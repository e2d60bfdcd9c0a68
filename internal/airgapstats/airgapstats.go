// Package airgapstats is what the site and central stores share to report
// air-gap transfers: a histogram aggregated in SQL over the rows that record
// each export, ack and import, and the fixed buckets both sides use. The
// numbers live in the stores because the CLI that transfers is a process of
// its own; the daemon and the central worker read them at scrape time. The
// package knows nothing of Prometheus, so the stores (and the site SDK that
// embeds one) do not depend on it.
package airgapstats

import (
	"strconv"
	"strings"
)

// Fixed buckets: one set for every process, so site and central histograms
// of the same name add up across instances, and a bucket never moves
// between releases (a moving bucket breaks rate() over the change).
var (
	// SizeBuckets (bytes) run from 4 KiB to 1 GiB, the largest file an
	// import reads (airgap.MaxFileBytes), by factors of 4: an entry is about
	// 1 KiB of indented JSON, so they tell a handful of operations from a
	// thousand, and a week offline from months.
	SizeBuckets = []float64{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30}
	// DurationBuckets (seconds) run from 10 ms, an ack of a small receipt,
	// to 20 minutes, an import handing a hundred thousand notifications to
	// their workflows sixteen at a time.
	DurationBuckets = []float64{0.01, 0.05, 0.25, 1, 5, 15, 60, 300, 1200}
	// EntryBuckets (entries per import) are powers of ten up to a million:
	// what a site accepts in a shift, a day, weeks.
	EntryBuckets = []float64{1, 10, 100, 1000, 10000, 100000, 1000000}
)

// Histogram is the aggregate of one column over some rows. Buckets maps
// each upper bound to the rows at or below it (cumulative, as Prometheus
// histograms count).
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// HistogramScan aggregates one column into a Histogram: Columns is the
// SELECT list, Dest where to scan it, Histogram the result once scanned.
type HistogramScan struct {
	bounds  []float64
	count   int64
	sum     float64
	buckets []int64
}

// NewHistogramScan aggregates into the buckets of bounds.
func NewHistogramScan(bounds []float64) *HistogramScan {
	return &HistogramScan{bounds: bounds, buckets: make([]int64, len(bounds))}
}

// Columns is the SELECT list aggregating expr: the rows where it is not
// NULL, its sum, and per bound the rows at or below it. Bounds are
// constants written into the SQL, which both SQLite and SQL Server read.
func (h *HistogramScan) Columns(expr string) string {
	cols := []string{"COUNT(" + expr + ")", "COALESCE(SUM(" + expr + "), 0)"}
	for _, b := range h.bounds {
		bound := strconv.FormatFloat(b, 'f', -1, 64)
		cols = append(cols, "COALESCE(SUM(CASE WHEN "+expr+" <= "+bound+" THEN 1 ELSE 0 END), 0)")
	}
	return strings.Join(cols, ", ")
}

// Dest is where to scan the columns of Columns, in order.
func (h *HistogramScan) Dest() []any {
	dest := []any{&h.count, &h.sum}
	for i := range h.buckets {
		dest = append(dest, &h.buckets[i])
	}
	return dest
}

// Histogram is what was scanned.
func (h *HistogramScan) Histogram() Histogram {
	out := Histogram{Count: uint64(h.count), Sum: h.sum, Buckets: make(map[float64]uint64, len(h.bounds))}
	for i, b := range h.bounds {
		out.Buckets[b] = uint64(h.buckets[i])
	}
	return out
}
