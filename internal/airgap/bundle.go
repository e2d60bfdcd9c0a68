package airgap

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/outpost-dev/outpost/contract"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// Formats and DSSE payload types of the two files.
const (
	BundleFormat       = "outpost-airgap-bundle/v1"
	BundlePayloadType  = "application/vnd.outpost.airgap.bundle+json"
	ReceiptFormat      = "outpost-airgap-receipt/v1"
	ReceiptPayloadType = "application/vnd.outpost.airgap.receipt+json"
)

// Entry is one accepted operation in a node's job log.
type Entry struct {
	NodeID      string    `json:"nodeId"`
	THLC        string    `json:"tHlc"`        // hlc.Timestamp.String()
	JobID       string    `json:"jobId"`       // the operation id
	Kind        string    `json:"kind"`        // contract.Kind*
	Payload     string    `json:"payload"`     // the operation's JSON, byte-exact (a string so no encoder reformats it)
	PayloadHash string    `json:"payloadHash"` // base64 (std) of SHA-256(Payload)
	PrevLink    *string   `json:"prevLink"`    // base64; null for a node's very first entry
	Link        string    `json:"link"`        // base64 of hlc.Link
	EnqueuedAt  time.Time `json:"enqueuedAt"`
}

// Checkpoint is where a log's chain starts when earlier entries were pruned
// or not exported: the link and HLC of the entry before the first one in
// Entries.
type Checkpoint struct {
	Link string `json:"link"`
	HLC  string `json:"hlc"`
}

// JobLog is the exported part of one node's job log.
type JobLog struct {
	NodeID     string      `json:"nodeId"`
	LastHLC    string      `json:"lastHlc"`
	ChainHead  string      `json:"chainHead"`            // base64 link of the last entry
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"` // nil: Entries start at the node's first entry
	Entries    []Entry     `json:"entries"`
}

// Bundle is the file a site exports.
type Bundle struct {
	Format          string         `json:"format"`   // BundleFormat
	BundleID        string         `json:"bundleId"` // random UUID
	TenantID        string         `json:"tenantId"` // the site id
	CreatedAt       time.Time      `json:"createdAt"`
	CreatedByNodeID string         `json:"createdByNodeId"`
	ManifestDigest  string         `json:"manifestDigest"` // "sha256:<hex>", see ManifestDigest
	Signature       *dsse.Envelope `json:"signature,omitempty"`
	SignedBy        string         `json:"signedBy,omitempty"` // key id
	JobLogs         []JobLog       `json:"jobLogs"`
	// Calls is the tracking state, at export, of every cached call in the
	// logs: central mirrors where the site got to (the site drives them).
	Calls []contract.TrackedOperation `json:"calls,omitempty"`
}

// NewBundle is an unsigned bundle of logs (and the states of their cached
// calls), written by node of site tenant.
func NewBundle(tenant, node string, createdAt time.Time, logs []JobLog, calls ...contract.TrackedOperation) Bundle {
	return Bundle{
		Format:          BundleFormat,
		BundleID:        uuid.NewString(),
		TenantID:        tenant,
		CreatedAt:       createdAt.Round(0), // drop the monotonic reading: it does not survive the file
		CreatedByNodeID: node,
		ManifestDigest:  manifestDigest(logs, calls, loggedPayloadSums(logs)),
		JobLogs:         logs,
		Calls:           calls,
	}
}

// bundleStatement is what a bundle's signature covers: the header, and
// through the manifest digest every log.
type bundleStatement struct {
	Format          string    `json:"format"`
	BundleID        string    `json:"bundleId"`
	TenantID        string    `json:"tenantId"`
	CreatedAt       time.Time `json:"createdAt"`
	CreatedByNodeID string    `json:"createdByNodeId"`
	ManifestDigest  string    `json:"manifestDigest"`
}

func (b *Bundle) statement() bundleStatement {
	return bundleStatement{
		Format:          b.Format,
		BundleID:        b.BundleID,
		TenantID:        b.TenantID,
		CreatedAt:       b.CreatedAt,
		CreatedByNodeID: b.CreatedByNodeID,
		ManifestDigest:  b.ManifestDigest,
	}
}

// fields lists the statement as name and value, for naming the one a
// signed statement and its file disagree on.
func (s bundleStatement) fields() []field {
	return []field{
		{"format", s.Format},
		{"bundleId", s.BundleID},
		{"tenantId", s.TenantID},
		{"createdAt", formatTime(s.CreatedAt)},
		{"createdByNodeId", s.CreatedByNodeID},
		{"manifestDigest", s.ManifestDigest},
	}
}

// Sign signs b's header and manifest digest with key.
func (b *Bundle) Sign(key PrivateKey) error {
	env, err := signStatement(key, BundlePayloadType, b.statement())
	if err != nil {
		return fmt.Errorf("sign bundle %s: %w", b.BundleID, err)
	}
	b.Signature = env
	b.SignedBy = key.ID()
	return nil
}
