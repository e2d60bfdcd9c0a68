package sitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/internal/airgapstats"
)

// Kinds of air-gap transfer, as airgap_transfers records them.
const (
	TransferExport = "export"
	TransferAck    = "ack"
)

// Transfer is one air-gap export or ack of this site file: a row of
// airgap_transfers, which the daemon's metrics read.
type Transfer struct {
	Kind string
	// BundleID is the bundle written, or the receipt acked.
	BundleID string
	// Entries is the bundle's entries, or the operations the receipt names.
	Entries int
	// NewEntries is, for an export, the operations leaving the site by
	// air-gap: entries on a bundle for the first time that central had not
	// acknowledged online (so an operation exported again counts once);
	// for an ack, the operations the receipt settled now.
	NewEntries int
	// Bytes is the file's size.
	Bytes    int64
	Duration time.Duration
	At       time.Time
	// ClockRefused is set on an ack whose receipt's time was more than the
	// allowed offset ahead of this node's clock: refused, not adopted.
	ClockRefused bool
}

// RecordExport marks the entries of ids exported at t.At (the site's
// status then says Exported until a receipt or an online hand-off settles
// them) and records export t, whose NewEntries it counts, in one
// transaction. It returns t as recorded.
func (s *Store) RecordExport(ctx context.Context, t Transfer, ids []string) (Transfer, error) {
	t.Kind = TransferExport
	err := s.inTx(ctx, "record export of bundle "+t.BundleID, func(tx *writeTx) (err error) {
		if t.NewEntries, err = markExported(tx, t.At, ids); err != nil {
			return err
		}
		return insertTransfer(tx, t)
	})
	return t, err
}

// markExported sets the export time of the entries of ids and returns how
// many of those jobs left on a bundle for the first time, not acknowledged
// online. The statements are prepared once: a bundle of weeks holds
// hundreds of thousands of ids, all marked while the write lock is held.
func markExported(tx *writeTx, at time.Time, ids []string) (int, error) {
	firstTime, err := tx.tx.PrepareContext(tx.ctx, `SELECT EXISTS (SELECT 1 FROM job_log WHERE job_id = ? AND exported_at IS NULL AND acked = ?)`)
	if err != nil {
		return 0, fmt.Errorf("prepare export state read: %w", err)
	}
	defer firstTime.Close()
	mark, err := tx.prepare(`UPDATE job_log SET exported_at = ? WHERE job_id = ?`)
	if err != nil {
		return 0, fmt.Errorf("prepare export mark: %w", err)
	}
	defer mark.Close()
	first := 0
	for _, id := range ids {
		var isFirst bool
		if err := firstTime.QueryRowContext(tx.ctx, id, ackNone).Scan(&isFirst); err != nil {
			return 0, fmt.Errorf("read export state of %s: %w", id, err)
		}
		if _, err := mark.exec(at.UnixNano(), id); err != nil {
			return 0, fmt.Errorf("mark %s exported: %w", id, err)
		}
		if isFirst {
			first++
		}
	}
	return first, nil
}

// RecordAck records ack t of a receipt.
func (s *Store) RecordAck(ctx context.Context, t Transfer) error {
	t.Kind = TransferAck
	return s.inTx(ctx, "record ack of receipt "+t.BundleID, func(tx *writeTx) error { return insertTransfer(tx, t) })
}

func insertTransfer(tx *writeTx, t Transfer) error {
	_, err := tx.exec(`INSERT INTO airgap_transfers (kind, bundle_id, entries, new_entries, bytes, duration_seconds, at, clock_refused)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, t.Kind, t.BundleID, t.Entries, t.NewEntries, t.Bytes, t.Duration.Seconds(), t.At.UnixNano(), t.ClockRefused)
	if err != nil {
		return fmt.Errorf("record %s of %s: %w", t.Kind, t.BundleID, err)
	}
	return nil
}

// TransferStats is what the recorded transfers of one kind add up to.
type TransferStats struct {
	Count      int64
	NewEntries int64
	// ClockRefusals is how many acks refused their receipt's clock.
	ClockRefusals int64
	Bytes         airgapstats.Histogram
	Duration      airgapstats.Histogram
}

// TransferStats aggregates the transfers of kind recorded in this file
// (TransferExport or TransferAck). One scan of a table that grows by a row
// per transfer: cheap at every scrape.
func (s *Store) TransferStats(ctx context.Context, kind string) (TransferStats, error) {
	bytes := airgapstats.NewHistogramScan(airgapstats.SizeBuckets)
	took := airgapstats.NewHistogramScan(airgapstats.DurationBuckets)
	var st TransferStats
	dest := append([]any{&st.Count, &st.NewEntries, &st.ClockRefusals}, bytes.Dest()...)
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(new_entries), 0), COALESCE(SUM(clock_refused), 0), `+bytes.Columns("bytes")+`, `+
		took.Columns("duration_seconds")+` FROM airgap_transfers WHERE kind = ?`, kind).Scan(append(dest, took.Dest()...)...)
	if err != nil {
		return TransferStats{}, fmt.Errorf("air-gap %s stats: %w", kind, err)
	}
	st.Bytes, st.Duration = bytes.Histogram(), took.Histogram()
	return st, nil
}
