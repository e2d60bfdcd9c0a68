package centralstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
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
}

const airgapImportColumns = `bundle_id, site_id, nodes, entries, imported, duplicates, skipped, chain_heads, imported_by, imported_at`

// RecordAirgapImport stores imp; a bundle already recorded keeps its first record.
func (s *Store) RecordAirgapImport(ctx context.Context, imp AirgapImport) error {
	_, err := s.db.ExecContext(ctx, s.bind(`INSERT INTO airgap_imports (`+airgapImportColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		imp.BundleID, imp.SiteID, strings.Join(imp.Nodes, ","), imp.Entries, imp.Imported, imp.Duplicates, imp.Skipped,
		strings.Join(imp.ChainHeads, ","), imp.ImportedBy, imp.ImportedAt.UTC())
	if err != nil {
		return fmt.Errorf("record import of bundle %s: %w", imp.BundleID, err)
	}
	return nil
}

// GetAirgapImport reads the record of bundleID; ErrNotFound when central
// never imported it.
func (s *Store) GetAirgapImport(ctx context.Context, bundleID string) (AirgapImport, error) {
	var imp AirgapImport
	var nodes, heads string
	err := s.db.QueryRowContext(ctx, s.bind(`SELECT `+airgapImportColumns+` FROM airgap_imports WHERE bundle_id = ?`), bundleID).
		Scan(&imp.BundleID, &imp.SiteID, &nodes, &imp.Entries, &imp.Imported, &imp.Duplicates, &imp.Skipped, &heads, &imp.ImportedBy, &imp.ImportedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return AirgapImport{}, fmt.Errorf("bundle %s: %w", bundleID, ErrNotFound)
	}
	if err != nil {
		return AirgapImport{}, fmt.Errorf("read import of bundle %s: %w", bundleID, err)
	}
	imp.Nodes, imp.ChainHeads = splitList(nodes), splitList(heads)
	imp.ImportedAt = imp.ImportedAt.UTC()
	return imp, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
