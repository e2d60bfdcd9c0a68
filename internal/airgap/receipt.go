package airgap

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// Accepted is one operation central took from an imported bundle.
type Accepted struct {
	JobID  string `json:"jobId"`
	Kind   string `json:"kind"`
	Status string `json:"status"` // central's state of it at import, e.g. "Pending", "Delivered"
	// RetryCount, LastAttemptAt and DeliveredAt are central's record of a
	// notification it had before the import (none for one it took now).
	RetryCount    int        `json:"retryCount,omitempty"`
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	DeliveredAt   *time.Time `json:"deliveredAt,omitempty"`
}

// Head is how far central has a node's chain: its last link and HLC.
type Head struct {
	NodeID string `json:"nodeId"`
	Link   string `json:"link"`
	HLC    string `json:"hlc"`
}

// Receipt is central's signed acknowledgement of imported bundles, which a
// site settles its job log by.
type Receipt struct {
	Format    string         `json:"format"` // ReceiptFormat
	ReceiptID string         `json:"receiptId"`
	TenantID  string         `json:"tenantId"`
	CreatedAt time.Time      `json:"createdAt"`
	BundleIDs []string       `json:"bundleIds"`
	Accepted  []Accepted     `json:"accepted"`
	Heads     []Head         `json:"chainHeads"`
	Digest    string         `json:"digest"` // see receiptDigest
	Signature *dsse.Envelope `json:"signature,omitempty"`
	SignedBy  string         `json:"signedBy,omitempty"`
}

// NewReceipt is an unsigned receipt for site tenant.
func NewReceipt(tenant string, createdAt time.Time, bundleIDs []string, accepted []Accepted, heads []Head) Receipt {
	r := Receipt{
		Format:    ReceiptFormat,
		ReceiptID: uuid.NewString(),
		TenantID:  tenant,
		CreatedAt: createdAt.Round(0), // drop the monotonic reading: it does not survive the file
		BundleIDs: bundleIDs,
		Accepted:  accepted,
		Heads:     heads,
	}
	r.Digest = receiptDigest(r)
	return r
}

// receiptDigest is "sha256:" and the hex SHA-256 of, in the encoding of
// canonical (see there):
//
//	"outpost-airgap-receipt/v1-digest", format, receiptId, tenantId,
//	createdAt as Unix nanoseconds,
//	the number of bundle ids, then each,
//	the number of accepted operations, then each one's jobId, kind, status,
//	the number of chain heads, then each one's nodeId, link, hlc,
//	and only when an accepted operation carries central's record (retry
//	count, last attempt, delivery): the number of those, then each one's
//	index in accepted, retry count, and each time as present (1 byte) and
//	Unix nanoseconds, or absent (0).
//
// The records come last and only when there are some, so a receipt without
// them (every receipt written before they existed) keeps its digest.
func receiptDigest(r Receipt) string {
	c := newCanonical("outpost-airgap-receipt/v1-digest")
	c.str(r.Format)
	c.str(r.ReceiptID)
	c.str(r.TenantID)
	c.uint(uint64(r.CreatedAt.UnixNano()))
	c.uint(uint64(len(r.BundleIDs)))
	for _, id := range r.BundleIDs {
		c.str(id)
	}
	c.uint(uint64(len(r.Accepted)))
	for _, a := range r.Accepted {
		c.str(a.JobID)
		c.str(a.Kind)
		c.str(a.Status)
	}
	c.uint(uint64(len(r.Heads)))
	for _, h := range r.Heads {
		c.str(h.NodeID)
		c.str(h.Link)
		c.str(h.HLC)
	}
	var recorded []int
	for i, a := range r.Accepted {
		if a.hasRecord() {
			recorded = append(recorded, i)
		}
	}
	if len(recorded) > 0 {
		c.uint(uint64(len(recorded)))
		for _, i := range recorded {
			a := r.Accepted[i]
			c.uint(uint64(i))
			c.uint(uint64(a.RetryCount))
			c.time(a.LastAttemptAt)
			c.time(a.DeliveredAt)
		}
	}
	return c.digest()
}

// hasRecord reports whether a carries central's record of its operation.
func (a Accepted) hasRecord() bool {
	return a.RetryCount != 0 || a.LastAttemptAt != nil || a.DeliveredAt != nil
}

// receiptStatement is what a receipt's signature covers: its header, and
// through the digest its content.
type receiptStatement struct {
	Format    string    `json:"format"`
	ReceiptID string    `json:"receiptId"`
	TenantID  string    `json:"tenantId"`
	CreatedAt time.Time `json:"createdAt"`
	Digest    string    `json:"digest"`
}

func (r *Receipt) statement() receiptStatement {
	return receiptStatement{
		Format:    r.Format,
		ReceiptID: r.ReceiptID,
		TenantID:  r.TenantID,
		CreatedAt: r.CreatedAt,
		Digest:    r.Digest,
	}
}

func (s receiptStatement) fields() []field {
	return []field{
		{"format", s.Format},
		{"receiptId", s.ReceiptID},
		{"tenantId", s.TenantID},
		{"createdAt", formatTime(s.CreatedAt)},
		{"digest", s.Digest},
	}
}

// Sign signs r's header and digest with key.
func (r *Receipt) Sign(key PrivateKey) error {
	env, err := signStatement(key, ReceiptPayloadType, r.statement())
	if err != nil {
		return fmt.Errorf("sign receipt %s: %w", r.ReceiptID, err)
	}
	r.Signature = env
	r.SignedBy = key.ID()
	return nil
}

// VerifyReceipt checks r's format, digest and signature under opts; the
// error lists every problem, one per line.
func VerifyReceipt(r Receipt, opts VerifyOptions) error {
	return checkReceipt(r, opts).Err()
}

func checkReceipt(r Receipt, opts VerifyOptions) Report {
	var problems []string
	if r.Format != ReceiptFormat {
		problems = append(problems, fmt.Sprintf("format is %q, want %q", r.Format, ReceiptFormat))
	}
	if computed := receiptDigest(r); computed != r.Digest {
		problems = append(problems, fmt.Sprintf("receipt digest does not match: stored %s, computed %s", r.Digest, computed))
	}
	problems = append(problems, checkSignature(signed{
		what:        "receipt",
		envelope:    r.Signature,
		signedBy:    r.SignedBy,
		payloadType: ReceiptPayloadType,
		header:      r.statement(),
		statement:   &receiptStatement{},
	}, opts)...)
	var report Report
	for _, what := range problems {
		report.Problems = append(report.Problems, Problem{Index: -1, What: what})
	}
	return report
}
