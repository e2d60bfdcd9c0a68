package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/internal/airgap"
)

// The least export and import-verify may reach of SHA-256's speed over the
// same file: each may cost at most about twice hashing it.
const (
	airgapExportTarget = 0.5
	airgapVerifyTarget = 0.45
)

// airgap times exporting (build, sign, encode) and importing with
// verification (decode, check signature, manifest digest and every link) a
// bundle of AirgapEntries, each beside SHA-256 alone over the same bundle
// file. Both run in memory: the file system is not what is measured.
func (r *run) airgap(context.Context) ([]Row, error) {
	n := r.opts.AirgapEntries
	r.step("airgap: export and verify a bundle of %s entries", thousands(int64(n)))
	export, err := airgap.MeasureExport(n)
	if err != nil {
		return nil, fmt.Errorf("measure export: %w", err)
	}
	verify, err := airgap.MeasureVerify(n)
	if err != nil {
		return nil, fmt.Errorf("measure verify: %w", err)
	}
	return []Row{
		airgapRow(fmt.Sprintf("export %s entries", thousands(int64(n))), n, export).atLeastRatio(airgapExportTarget),
		airgapRow(fmt.Sprintf("import-verify %s entries", thousands(int64(n))), n, verify).atLeastRatio(airgapVerifyTarget),
	}, nil
}

// airgapRow is entries per second beside the entries per second SHA-256
// alone would get through the same file.
func airgapRow(measure string, n int, m airgap.Measurement) Row {
	hash := Figure{Name: "SHA-256 of the same file", Value: perSecond(n, m.HashOnly), Unit: "/s"}
	return compare(SectionAirgap, measure, perSecond(n, m.Took), "/s", hash).
		withDetail("%s in %s (%.0f MB/s), SHA-256 alone %s; each the best of 5 rounds, timed alternately", sizeMB(m.FileBytes),
			m.Took.Round(time.Millisecond), mbPerSecond(m.FileBytes, m.Took), m.HashOnly.Round(time.Millisecond))
}

func sizeMB(b int) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }

func mbPerSecond(b int, d time.Duration) float64 { return float64(b) / 1e6 / d.Seconds() }
