package centralstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/internal/airgapstats"
)

// AirgapImport is one row of airgap_imports: a bundle central imported,
// kept so the same bundle imported again changes nothing and says when it
// came first.
type AirgapImport struct {
	BundleID string
	SiteID   string
	Nodes    []string
	// Entries is every entry of the bundle; Imported those handed to a
	// workflow or mirrored now; Duplicates those central already had;
	// Skipped those left out by --force (their log did not verify).
	Entries, Imported, Duplicates, Skipped int
	// ChainHeads is each node's chain head after the import, "node=link".
	ChainHeads []string
	ImportedBy string
	ImportedAt time.Time
	// Bytes is the bundle file's size; 0 for a bundle recorded before
	// sizes were.
	Bytes int64
}

// Outcomes of an import run.
const (
	AirgapImported = "imported"
	// AirgapRefused is a run its merge refused for conflicts: nothing of
	// it was handed to central.
	AirgapRefused = "refused"
)

// AirgapImportRun is one row of airgap_import_runs: one import, which
// merged its bundles and handed them over, or was refused for conflicts.
// Runs are a table of their own, not a status column of airgap_imports: a
// run may merge several bundles, so its counts and duration belong to no
// one bundle, and a refused run imported no bundle, which must stay
// importable (a bundle's row there means "imported, do not take again").
type AirgapImportRun struct {
	RunID     string
	Outcome   string
	BundleIDs []string
	// Entries is every entry of the run's bundles. An imported run splits
	// them into Imported, Duplicates (central had them: dropped) and
	// Skipped (--force left them out); a refused run has none of those.
	Entries, Imported, Duplicates, Skipped int
	// Conflicts counts a refused run's conflicts by type (airgap.Conflict.Type).
	Conflicts  map[string]int
	Duration   time.Duration
	ImportedBy string
	At         time.Time
}

const airgapImportColumns = `bundle_id, site_id, nodes, entries, imported, duplicates, skipped, chain_heads, imported_by, imported_at, bytes`

// RecordAirgapImport stores run and the bundles it imported in one
// transaction: a bundle already recorded fails it all, and keeps its first
// record.
func (s *Store) RecordAirgapImport(ctx context.Context, run AirgapImportRun, imported ...AirgapImport) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for _, imp := range imported {
			if err := s.insertAirgapImport(ctx, tx, imp); err != nil {
				return err
			}
		}
		return s.insertAirgapRun(ctx, tx, run)
	})
	if err != nil {
		return fmt.Errorf("record air-gap import %s: %w", run.RunID, err)
	}
	return nil
}

func (s *Store) insertAirgapImport(ctx context.Context, tx *sql.Tx, imp AirgapImport) error {
	_, err := tx.ExecContext(ctx, s.bind(`INSERT INTO airgap_imports (`+airgapImportColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		imp.BundleID, imp.SiteID, strings.Join(imp.Nodes, ","), imp.Entries, imp.Imported, imp.Duplicates, imp.Skipped,
		strings.Join(imp.ChainHeads, ","), imp.ImportedBy, imp.ImportedAt.UTC(), imp.Bytes)
	if err != nil {
		return fmt.Errorf("bundle %s: %w", imp.BundleID, err)
	}
	return nil
}

func (s *Store) insertAirgapRun(ctx context.Context, tx *sql.Tx, run AirgapImportRun) error {
	_, err := tx.ExecContext(ctx, s.bind(`INSERT INTO airgap_import_runs (run_id, outcome, bundle_ids, entries, imported,
		duplicates, skipped, duration_seconds, imported_by, run_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		run.RunID, run.Outcome, strings.Join(run.BundleIDs, ","), run.Entries, run.Imported, run.Duplicates, run.Skipped,
		run.Duration.Seconds(), run.ImportedBy, run.At.UTC())
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	for kind, n := range run.Conflicts {
		_, err := tx.ExecContext(ctx, s.bind(`INSERT INTO airgap_import_conflicts (run_id, conflict_type, conflicts) VALUES (?, ?, ?)`),
			run.RunID, kind, n)
		if err != nil {
			return fmt.Errorf("conflicts of type %s: %w", kind, err)
		}
	}
	return nil
}

// GetAirgapImport reads the record of bundleID; ErrNotFound when central
// never imported it.
func (s *Store) GetAirgapImport(ctx context.Context, bundleID string) (AirgapImport, error) {
	var imp AirgapImport
	var nodes, heads string
	var size sql.NullInt64
	err := s.reads.QueryRowContext(ctx, s.bind(`SELECT `+airgapImportColumns+` FROM airgap_imports WHERE bundle_id = ?`), bundleID).
		Scan(&imp.BundleID, &imp.SiteID, &nodes, &imp.Entries, &imp.Imported, &imp.Duplicates, &imp.Skipped, &heads, &imp.ImportedBy, &imp.ImportedAt, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return AirgapImport{}, fmt.Errorf("bundle %s: %w", bundleID, ErrNotFound)
	}
	if err != nil {
		return AirgapImport{}, fmt.Errorf("read import of bundle %s: %w", bundleID, err)
	}
	imp.Nodes, imp.ChainHeads = splitList(nodes), splitList(heads)
	imp.ImportedAt, imp.Bytes = imp.ImportedAt.UTC(), size.Int64
	return imp, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// AirgapImportStats is what central's air-gap imports add up to.
type AirgapImportStats struct {
	// Bundles is how many bundles central imported, and BundleBytes their
	// file sizes (bundles recorded before sizes were are left out).
	Bundles     int64
	BundleBytes airgapstats.Histogram
	// Imported and Duplicates sum the runs (a refused run has neither).
	Imported, Duplicates int64
	// Conflicts sums the refused runs' conflicts by type.
	Conflicts map[string]int64
	// Duration and Entries are those of every run, refused ones included.
	Duration, Entries airgapstats.Histogram
}

// AirgapImportStats aggregates the air-gap tables: one scan each of tables
// that grow by a row per bundle or import, cheap at every scrape.
func (s *Store) AirgapImportStats(ctx context.Context) (AirgapImportStats, error) {
	var st AirgapImportStats
	var err error
	if st.Bundles, st.BundleBytes, err = s.airgapBundleStats(ctx); err != nil {
		return st, fmt.Errorf("air-gap import stats: %w", err)
	}
	if err := s.airgapRunStats(ctx, &st); err != nil {
		return st, fmt.Errorf("air-gap import stats: %w", err)
	}
	if st.Conflicts, err = s.airgapConflictStats(ctx); err != nil {
		return st, fmt.Errorf("air-gap import stats: %w", err)
	}
	return st, nil
}

func (s *Store) airgapBundleStats(ctx context.Context) (int64, airgapstats.Histogram, error) {
	sizes := airgapstats.NewHistogramScan(airgapstats.SizeBuckets)
	var bundles int64
	err := s.reads.QueryRowContext(ctx, `SELECT COUNT(*), `+sizes.Columns("bytes")+` FROM airgap_imports`).
		Scan(append([]any{&bundles}, sizes.Dest()...)...)
	if err != nil {
		return 0, airgapstats.Histogram{}, fmt.Errorf("bundles: %w", err)
	}
	return bundles, sizes.Histogram(), nil
}

func (s *Store) airgapRunStats(ctx context.Context, st *AirgapImportStats) error {
	took := airgapstats.NewHistogramScan(airgapstats.DurationBuckets)
	entries := airgapstats.NewHistogramScan(airgapstats.EntryBuckets)
	dest := append([]any{&st.Imported, &st.Duplicates}, took.Dest()...)
	err := s.reads.QueryRowContext(ctx, `SELECT COALESCE(SUM(imported), 0), COALESCE(SUM(duplicates), 0), `+
		took.Columns("duration_seconds")+`, `+entries.Columns("entries")+` FROM airgap_import_runs`).
		Scan(append(dest, entries.Dest()...)...)
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	st.Duration, st.Entries = took.Histogram(), entries.Histogram()
	return nil
}

func (s *Store) airgapConflictStats(ctx context.Context) (map[string]int64, error) {
	rows, err := s.reads.QueryContext(ctx, `SELECT conflict_type, SUM(conflicts) FROM airgap_import_conflicts GROUP BY conflict_type`)
	if err != nil {
		return nil, fmt.Errorf("conflicts: %w", err)
	}
	defer rows.Close()
	conflicts := map[string]int64{}
	for rows.Next() {
		var kind string
		var n int64
		if err := rows.Scan(&kind, &n); err != nil {
			return nil, fmt.Errorf("conflicts: %w", err)
		}
		conflicts[kind] = n
	}
	return conflicts, rows.Err()
}
