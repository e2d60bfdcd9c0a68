package airgap

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Summary is one file of a listing.
type Summary struct {
	Path      string
	Type      string // "bundle", "receipt" or "unknown"
	ID        string // bundleId or receiptId
	Site      string
	Nodes     []string // a bundle's logs' nodes, a receipt's heads' nodes
	Entries   int      // a bundle's entries, a receipt's accepted operations
	CreatedAt time.Time
	Signer    string
	Verified  bool
	Problem   string // the first problem when not verified
}

// Describe reads the bundle or receipt at path, telling which by its
// format, and verifies it with opts.
func Describe(path string, opts VerifyOptions) (Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return Summary{}, fmt.Errorf("describe: %w", err)
	}
	defer f.Close()
	data, err := readFile(f)
	if err != nil {
		return Summary{}, fmt.Errorf("describe %s: %w", path, err)
	}
	format, err := formatOf(data)
	if err != nil {
		return Summary{}, fmt.Errorf("describe %s: not a JSON document: %w", path, err)
	}
	switch format {
	case BundleFormat:
		b, err := decodeBundle(data)
		if err != nil {
			return Summary{}, fmt.Errorf("describe %s: %w", path, err)
		}
		return describeBundle(path, b, Verify(b, opts)), nil
	case ReceiptFormat:
		r, err := decodeReceipt(data)
		if err != nil {
			return Summary{}, fmt.Errorf("describe %s: %w", path, err)
		}
		return describeReceipt(path, r, checkReceipt(r, opts)), nil
	}
	return Summary{}, fmt.Errorf("describe %s: format %q is neither %q nor %q", path, format, BundleFormat, ReceiptFormat)
}

func describeBundle(path string, b Bundle, report Report) Summary {
	s := Summary{Path: path, Type: "bundle", ID: b.BundleID, Site: b.TenantID, CreatedAt: b.CreatedAt, Signer: b.SignedBy}
	for _, log := range b.JobLogs {
		s.Nodes = append(s.Nodes, log.NodeID)
		s.Entries += len(log.Entries)
	}
	s.Verified, s.Problem = verdict(report)
	return s
}

func describeReceipt(path string, r Receipt, report Report) Summary {
	s := Summary{Path: path, Type: "receipt", ID: r.ReceiptID, Site: r.TenantID, CreatedAt: r.CreatedAt, Signer: r.SignedBy,
		Entries: len(r.Accepted)}
	for _, h := range r.Heads {
		s.Nodes = append(s.Nodes, h.NodeID)
	}
	s.Verified, s.Problem = verdict(report)
	return s
}

func verdict(report Report) (verified bool, firstProblem string) {
	if report.OK() {
		return true, ""
	}
	return false, report.Problems[0].String()
}

// DescribeDir describes every *.json file in dir, sorted by creation time,
// then path. A file that is neither a bundle nor a receipt is listed with
// Type "unknown" and why in Problem: one stray file does not hide the rest.
func DescribeDir(dir string, opts VerifyOptions) ([]Summary, error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var summaries []Summary
	for _, f := range files {
		if f.IsDir() || !strings.HasSuffix(f.Name(), ".json") {
			continue
		}
		path := filepath.Join(dir, f.Name())
		s, err := Describe(path, opts)
		if err != nil {
			s = Summary{Path: path, Type: "unknown", Problem: err.Error()}
		}
		summaries = append(summaries, s)
	}
	slices.SortFunc(summaries, func(a, b Summary) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return summaries, nil
}
