// Package airgapsync moves a disconnected site's work to central and back
// on files: Export reads a site's job logs into a bundle, Import verifies
// bundles at central and hands their operations to the same workflows the
// online path starts, and Ack settles, on the site, what central's
// receipt says it has. The file format and its checks are package airgap.
package airgapsync

import (
	"context"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/airgap"
	"github.com/outpost-dev/outpost/internal/hlc"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// ExportOptions says what to export, and where.
type ExportOptions struct {
	// Site is the bundle's tenant: the site id.
	Site string
	// Node is the node whose log is exported, and the bundle's creator.
	Node string
	// Since, when set, exports the entries after it; by default every
	// entry after the node's acknowledged front.
	Since *hlc.Timestamp
	// Now is the bundle's creation time.
	Now time.Time
	// Path is the bundle file to write.
	Path string
	// Key, when set, signs the bundle.
	Key *airgap.PrivateKey
}

// Export reads opts.Node's job log into a bundle, signs it when opts.Key
// is set and writes it to opts.Path; only then are its entries marked
// exported and the export recorded (size, duration) for the site's
// metrics, so a failed write leaves no trace. The bundle carries the
// current tracking state of every cached call in it, so central mirrors
// where the site got to.
func Export(ctx context.Context, store *sitestore.Store, opts ExportOptions) (airgap.Bundle, error) {
	started := time.Now()
	b, entries, err := newBundle(ctx, store, opts)
	if err != nil {
		return airgap.Bundle{}, err
	}
	if opts.Key != nil {
		if err := b.Sign(*opts.Key); err != nil {
			return airgap.Bundle{}, err
		}
	}
	size, err := airgap.WriteFile(opts.Path, b)
	if err != nil {
		return airgap.Bundle{}, err
	}
	export := sitestore.Transfer{BundleID: b.BundleID, Entries: len(entries), Bytes: size, Duration: time.Since(started), At: opts.Now}
	if _, err := store.RecordExport(ctx, export, jobIDs(entries)); err != nil {
		return airgap.Bundle{}, fmt.Errorf("bundle %s is written to %s, but: %w", b.BundleID, opts.Path, err)
	}
	return b, nil
}

// newBundle is the unsigned bundle of opts.Node's log and the entries in it.
func newBundle(ctx context.Context, store *sitestore.Store, opts ExportOptions) (airgap.Bundle, []sitestore.Entry, error) {
	log, err := store.ReadJobLog(ctx, opts.Node, opts.Since)
	if err != nil {
		return airgap.Bundle{}, nil, err
	}
	if opts.Since == nil {
		log = skipAcknowledgedFront(log)
	}
	calls, err := callStates(ctx, store, log.Entries)
	if err != nil {
		return airgap.Bundle{}, nil, err
	}
	return airgap.NewBundle(opts.Site, opts.Node, opts.Now, []airgap.JobLog{bundleLog(log)}, calls...), log.Entries, nil
}

// skipAcknowledgedFront leaves out the entries at the front of log that
// central already has (pruning has not caught up with them yet).
func skipAcknowledgedFront(log sitestore.JobLog) sitestore.JobLog {
	i := 0
	for i < len(log.Entries) && log.Entries[i].Acked {
		i++
	}
	if i == 0 {
		return log
	}
	last := log.Entries[i-1]
	log.CheckpointLink, log.CheckpointHLC = last.Link, last.HLC.String()
	log.Entries = log.Entries[i:]
	return log
}

// callStates is the tracking row of every cached call among entries.
func callStates(ctx context.Context, store *sitestore.Store, entries []sitestore.Entry) ([]contract.TrackedOperation, error) {
	var calls []contract.TrackedOperation
	for _, e := range entries {
		if e.Kind == contract.KindNotification {
			continue
		}
		row, err := store.GetOperation(ctx, e.JobID)
		if err != nil {
			return nil, fmt.Errorf("export cached call %s: %w", e.JobID, err)
		}
		calls = append(calls, row)
	}
	return calls, nil
}

// bundleLog is a site job log in the bundle's format, its entries' strings
// packed one after another (airgap.Packer: the export reads them twice,
// and reading them scattered over the heap was half its time).
func bundleLog(log sitestore.JobLog) airgap.JobLog {
	out := airgap.JobLog{NodeID: log.Node, LastHLC: log.HeadHLC(), ChainHead: b64(log.Head), Entries: make([]airgap.Entry, 0, len(log.Entries))}
	if len(log.CheckpointLink) > 0 {
		out.Checkpoint = &airgap.Checkpoint{Link: b64(log.CheckpointLink), HLC: log.CheckpointHLC}
	}
	var packer airgap.Packer
	for _, e := range log.Entries {
		out.Entries = append(out.Entries, bundleEntry(&packer, e))
	}
	return out
}

// bundleEntry is e in the bundle's format, its strings laid out by packer
// in the order the encoder reads them.
func bundleEntry(packer *airgap.Packer, e sitestore.Entry) airgap.Entry {
	entry := airgap.Entry{
		NodeID: e.Node, THLC: packer.HLC(e.HLC), JobID: packer.String(e.JobID), Kind: e.Kind,
		Payload: packer.Bytes(e.Payload), PayloadHash: packer.Base64(e.PayloadHash), EnqueuedAt: e.EnqueuedAt,
	}
	if len(e.PrevLink) > 0 {
		prev := packer.Base64(e.PrevLink)
		entry.PrevLink = &prev
	}
	entry.Link = packer.Base64(e.Link)
	return entry
}

func jobIDs(entries []sitestore.Entry) []string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.JobID
	}
	return ids
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
