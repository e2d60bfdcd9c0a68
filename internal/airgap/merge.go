package airgap

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/hlc"
)

// Merged is the entries of several bundles in one total order, each job
// once.
type Merged struct {
	Entries    []Entry    // in HLC total order, each jobId once
	Duplicates int        // entries dropped as an earlier one's copy
	Conflicts  []Conflict // entries dropped for contradicting an earlier one
	Heads      []Head     // the latest chain head of every node, by nodeId
}

// Conflict types.
const (
	ConflictPayloadMismatch = "payload-mismatch"
	ConflictKindMismatch    = "kind-mismatch"
)

// Conflict is two entries of one job that disagree; First is the one kept.
type Conflict struct {
	JobID  string `json:"jobId"`
	Type   string `json:"type"`
	First  Entry  `json:"first"`
	Second Entry  `json:"second"`
}

// ConflictError is Merge's refusal of contradicting entries.
type ConflictError struct {
	Conflicts []Conflict
}

func (e *ConflictError) Error() string {
	lines := make([]string, len(e.Conflicts))
	for i, c := range e.Conflicts {
		lines[i] = fmt.Sprintf("job %s: %s between node %q at %s and node %q at %s",
			c.JobID, c.Type, c.First.NodeID, c.First.THLC, c.Second.NodeID, c.Second.THLC)
	}
	return fmt.Sprintf("%d conflicting entries:\n%s", len(e.Conflicts), strings.Join(lines, "\n"))
}

// stamped is an entry with its parsed HLC, for ordering.
type stamped struct {
	ts hlc.Timestamp
	Entry
}

// Merge orders the entries of every log of every bundle by the HLC total
// order (physical, logical, nodeId, jobId) and keeps each job's earliest
// entry. A later entry of the same job with the same payload (or the same
// request, see sameRequest) is a duplicate: a re-exported entry, or one
// idempotency key used on two nodes. With another request or kind it is a
// conflict, and Merge returns a *ConflictError along with the Merged, so
// the caller can report both. The result does not depend on the order of
// bundles or logs. Bundles are expected to have verified; an unparsable HLC
// is an error.
func Merge(bundles []Bundle) (Merged, error) {
	all, err := collectEntries(bundles)
	if err != nil {
		return Merged{}, err
	}
	slices.SortFunc(all, compareStamped)
	var m Merged
	kept := map[string]Entry{}
	for _, s := range all {
		first, seen := kept[s.JobID]
		switch {
		case !seen:
			kept[s.JobID] = s.Entry
			m.Entries = append(m.Entries, s.Entry)
		case first.Kind != s.Kind:
			m.Conflicts = append(m.Conflicts, Conflict{JobID: s.JobID, Type: ConflictKindMismatch, First: first, Second: s.Entry})
		case first.Payload != s.Payload && !sameRequest(first, s.Entry):
			m.Conflicts = append(m.Conflicts, Conflict{JobID: s.JobID, Type: ConflictPayloadMismatch, First: first, Second: s.Entry})
		default:
			m.Duplicates++
		}
	}
	if m.Heads, err = latestHeads(bundles); err != nil {
		return Merged{}, err
	}
	if len(m.Conflicts) > 0 {
		return m, &ConflictError{Conflicts: m.Conflicts}
	}
	return m, nil
}

// sameRequest reports whether two entries of one job and kind whose
// payloads differ still carry the same request. A notification records
// which node took it and when; the same idempotency key used on two nodes
// (a script retried on the standby after a failover) gives one id and two
// such payloads, and that is one notification, not a conflict. Cached
// calls' payloads are the request alone, so a difference there is real.
func sameRequest(a, b Entry) bool {
	if a.Kind != contract.KindNotification {
		return false
	}
	x, errX := requestOf(a.Payload)
	y, errY := requestOf(b.Payload)
	return errX == nil && errY == nil && x == y
}

// requestOf is a notification's submission without where and when the
// site took it.
func requestOf(payload string) (contract.NotificationSubmission, error) {
	var sub contract.NotificationSubmission
	if err := json.Unmarshal([]byte(payload), &sub); err != nil {
		return sub, err
	}
	sub.SourceNode, sub.SiteEnqueuedAt = "", time.Time{}
	return sub, nil
}

func collectEntries(bundles []Bundle) ([]stamped, error) {
	var all []stamped
	for _, b := range bundles {
		for _, log := range b.JobLogs {
			for _, e := range log.Entries {
				ts, err := hlc.Parse(e.THLC)
				if err != nil {
					return nil, fmt.Errorf("merge bundle %s node %q job %s: %w", b.BundleID, log.NodeID, e.JobID, err)
				}
				all = append(all, stamped{ts: ts, Entry: e})
			}
		}
	}
	return all, nil
}

// compareStamped is the HLC total order, then every other field, so that
// even copies of a job that differ sort the same whichever bundle came
// first.
func compareStamped(a, b stamped) int {
	return cmp.Or(
		cmp.Compare(a.ts.Physical, b.ts.Physical),
		cmp.Compare(a.ts.Logical, b.ts.Logical),
		strings.Compare(a.NodeID, b.NodeID),
		strings.Compare(a.JobID, b.JobID),
		strings.Compare(a.Payload, b.Payload),
		strings.Compare(a.Kind, b.Kind),
		strings.Compare(a.THLC, b.THLC),
		strings.Compare(a.PayloadHash, b.PayloadHash),
		strings.Compare(showLink(a.PrevLink), showLink(b.PrevLink)),
		strings.Compare(a.Link, b.Link),
		a.EnqueuedAt.Compare(b.EnqueuedAt),
	)
}

// datedHead is a node's chain head with its parsed HLC.
type datedHead struct {
	ts hlc.Timestamp
	Head
}

// compare orders heads by HLC, then link, so equal HLCs still pick one
// head whatever the bundle order.
func (a datedHead) compare(b datedHead) int {
	return cmp.Or(
		cmp.Compare(a.ts.Physical, b.ts.Physical),
		cmp.Compare(a.ts.Logical, b.ts.Logical),
		strings.Compare(a.Link, b.Link),
	)
}

// latestHeads is, per node, the head of its latest log among the bundles
// (a later export of a node carries a later head), sorted by node.
func latestHeads(bundles []Bundle) ([]Head, error) {
	latest := map[string]datedHead{}
	for _, b := range bundles {
		for _, log := range b.JobLogs {
			if log.LastHLC == "" {
				continue // an empty log with no checkpoint: no head yet
			}
			ts, err := hlc.Parse(log.LastHLC)
			if err != nil {
				return nil, fmt.Errorf("merge bundle %s node %q lastHlc: %w", b.BundleID, log.NodeID, err)
			}
			head := datedHead{ts: ts, Head: Head{NodeID: log.NodeID, Link: log.ChainHead, HLC: log.LastHLC}}
			if prev, ok := latest[log.NodeID]; !ok || prev.compare(head) < 0 {
				latest[log.NodeID] = head
			}
		}
	}
	heads := make([]Head, 0, len(latest))
	for _, h := range latest {
		heads = append(heads, h.Head)
	}
	slices.SortFunc(heads, func(a, b Head) int { return strings.Compare(a.NodeID, b.NodeID) })
	return heads, nil
}
