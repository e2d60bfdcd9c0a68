package airgapsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/airgap"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
)

// Importer hands imported operations to central: notifications to their
// workflows, cached calls' states to site_calls.
type Importer struct {
	Temporal client.Client
	Store    *centralstore.Store
	// HideSubject keeps subjects out of workflow summaries, as the site's
	// forwarder does (site.list_only_summary).
	HideSubject bool
	// Region is the region of the central that imports (central.region):
	// imported notifications go to its task queue, marked OutpostRegion.
	Region contract.Region
}

// ImportOptions says how to import.
type ImportOptions struct {
	Verify airgap.VerifyOptions
	// VerifyOnly checks and merges, and hands nothing to central.
	VerifyOnly bool
	// Force imports the logs that verify and skips the rest, reporting
	// each; without it a bundle with any problem imports nothing.
	Force bool
	// By is who imports (recorded with each bundle).
	By  string
	Now time.Time
}

// BundleResult is what happened to one bundle.
type BundleResult struct {
	Path     string   `json:"path"`
	BundleID string   `json:"bundleId"`
	Site     string   `json:"site"`
	Nodes    []string `json:"nodes"`
	Entries  int      `json:"entries"`
	// Problems is every check the bundle failed.
	Problems []string `json:"problems,omitempty"`
	// Skipped names the logs left out (with --force) and why.
	Skipped []string `json:"skipped,omitempty"`
	// ImportedBefore is set when central had already imported this bundle.
	ImportedBefore *centralstore.AirgapImport `json:"importedBefore,omitempty"`
}

// ImportResult is the outcome of one import.
type ImportResult struct {
	Bundles []BundleResult `json:"bundles"`
	// Imported is how many operations central took now; Duplicates how
	// many it already had (the same bundle again, an entry exported twice,
	// or an operation that also arrived online); SkippedEntries how many
	// --force left out.
	Imported       int               `json:"imported"`
	Duplicates     int               `json:"duplicates"`
	SkippedEntries int               `json:"skippedEntries"`
	Conflicts      []airgap.Conflict `json:"conflicts,omitempty"`
	// Receipt names what central has of the bundles (nil for --verify-only
	// or when nothing was imported).
	Receipt *airgap.Receipt `json:"-"`
}

// ErrNotImported is returned when verification or a conflict stopped the
// import: nothing was handed to central.
var ErrNotImported = errors.New("nothing imported")

// Import verifies bundles, merges them in HLC order and hands each
// operation to central under the id the site gave it, so an operation
// that also arrived online is still one workflow and one email. Every
// import that reaches the merge is recorded with its outcome, size and
// duration (refused ones too), for central's metrics; --verify-only
// records nothing.
func (im *Importer) Import(ctx context.Context, bundles []Bundle, opts ImportOptions) (ImportResult, error) {
	started := time.Now()
	res, fresh, err := im.checkAll(ctx, bundles, opts)
	if err != nil {
		return res, err
	}
	merged, err := airgap.Merge(contents(fresh))
	res.Duplicates += merged.Duplicates
	if err != nil {
		return res, im.refuse(ctx, &res, err, opts, time.Since(started))
	}
	if opts.VerifyOnly {
		return res, nil
	}
	var accepted []airgap.Accepted
	if len(fresh) > 0 {
		var imported int
		accepted, imported, err = im.handOff(ctx, merged.Entries, callStatesOf(fresh))
		res.Imported, res.Duplicates = imported, res.Duplicates+len(merged.Entries)-imported
		if err != nil {
			return res, err
		}
	}
	if err := im.record(ctx, fresh, res, opts, time.Since(started)); err != nil {
		return res, err
	}
	if len(fresh) > 0 {
		receipt := airgap.NewReceipt(fresh[0].TenantID, opts.Now, bundleIDs(fresh), accepted, merged.Heads)
		res.Receipt = &receipt
	}
	return res, nil
}

// checkAll checks every bundle and returns what to import of them; an
// error when one failed verification and --force was not given.
func (im *Importer) checkAll(ctx context.Context, bundles []Bundle, opts ImportOptions) (ImportResult, []Bundle, error) {
	var res ImportResult
	var fresh []Bundle
	for _, b := range bundles {
		br, keep, err := im.check(ctx, b, opts)
		if err != nil {
			return res, nil, err
		}
		res.Bundles = append(res.Bundles, br)
		switch {
		case br.ImportedBefore != nil:
			res.Duplicates += br.Entries
		case keep != nil:
			fresh = append(fresh, Bundle{Path: b.Path, Bytes: b.Bytes, Bundle: *keep})
			res.SkippedEntries += br.Entries - entryCount(*keep)
		default:
			res.SkippedEntries += br.Entries
		}
	}
	return res, fresh, failedChecks(res, opts)
}

// refuse records an import its merge refused for conflicts (unless only
// verifying) and returns why nothing was imported.
func (im *Importer) refuse(ctx context.Context, res *ImportResult, mergeErr error, opts ImportOptions, took time.Duration) error {
	refused := fmt.Errorf("%w: %w", ErrNotImported, mergeErr)
	var conflict *airgap.ConflictError
	if !errors.As(mergeErr, &conflict) {
		return refused
	}
	res.Conflicts = conflict.Conflicts
	if opts.VerifyOnly {
		return refused
	}
	run := newRun(centralstore.AirgapRefused, *res, opts, took)
	run.Conflicts = map[string]int{}
	for _, c := range conflict.Conflicts {
		run.Conflicts[c.Type]++
	}
	if err := im.Store.RecordAirgapImport(ctx, run); err != nil {
		return errors.Join(refused, err)
	}
	return refused
}

// newRun is the record of an import with result res, which took took.
func newRun(outcome string, res ImportResult, opts ImportOptions, took time.Duration) centralstore.AirgapImportRun {
	run := centralstore.AirgapImportRun{RunID: uuid.NewString(), Outcome: outcome, Duration: took, ImportedBy: opts.By, At: opts.Now}
	for _, b := range res.Bundles {
		run.BundleIDs = append(run.BundleIDs, b.BundleID)
		run.Entries += b.Entries
	}
	if outcome == centralstore.AirgapImported {
		run.Imported, run.Duplicates, run.Skipped = res.Imported, res.Duplicates, res.SkippedEntries
	}
	return run
}

// check verifies one bundle and returns what of it to import: nil when
// nothing (it failed, or central has it already).
func (im *Importer) check(ctx context.Context, b Bundle, opts ImportOptions) (BundleResult, *airgap.Bundle, error) {
	br := BundleResult{Path: b.Path, BundleID: b.BundleID, Site: b.TenantID, Entries: entryCount(b.Bundle)}
	for _, l := range b.JobLogs {
		br.Nodes = append(br.Nodes, l.NodeID)
	}
	// Verified even when central has it: --verify-only is asked of this
	// copy, which may not be the one imported.
	report := airgap.Verify(b.Bundle, opts.Verify)
	for _, p := range report.Problems {
		br.Problems = append(br.Problems, p.String())
	}
	prior, err := im.Store.GetAirgapImport(ctx, b.BundleID)
	switch {
	case err == nil:
		br.ImportedBefore = &prior
		return br, nil, nil
	case !errors.Is(err, centralstore.ErrNotFound):
		return br, nil, err
	}
	keep := keepVerified(b.Bundle, report)
	if keep != nil {
		for _, l := range b.JobLogs {
			if report.BadNodes()[l.NodeID] {
				br.Skipped = append(br.Skipped, fmt.Sprintf("node %q: %d entries, its log did not verify", l.NodeID, len(l.Entries)))
			}
		}
	} else if !report.OK() {
		br.Skipped = append(br.Skipped, fmt.Sprintf("the whole bundle: %d entries, its manifest or signature did not verify", br.Entries))
	}
	return br, keep, nil
}

// keepVerified is b without the logs that failed verification; nil when a
// bundle-wide check failed (digest, signature), which leaves no log
// trustworthy.
func keepVerified(b airgap.Bundle, report airgap.Report) *airgap.Bundle {
	for _, p := range report.Problems {
		if p.NodeID == "" {
			return nil
		}
	}
	bad := report.BadNodes()
	var logs []airgap.JobLog
	for _, l := range b.JobLogs {
		if !bad[l.NodeID] {
			logs = append(logs, l)
		}
	}
	b.JobLogs = logs
	return &b
}

// failedChecks refuses the import when a bundle failed verification and
// --force was not given.
func failedChecks(res ImportResult, opts ImportOptions) error {
	if opts.Force {
		return nil
	}
	var failed []string
	for _, b := range res.Bundles {
		if len(b.Problems) > 0 {
			failed = append(failed, b.Path)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d bundle(s) did not verify (%v); fix or re-export them, or use --force to import only what verifies", ErrNotImported, len(failed), failed)
}

// handOffParallelism bounds the SignalWithStart calls in flight.
const handOffParallelism = 16

// handOff gives each entry to central and returns what central has of
// each, and how many it took now.
func (im *Importer) handOff(ctx context.Context, entries []airgap.Entry, calls map[string]contract.TrackedOperation) ([]airgap.Accepted, int, error) {
	accepted := make([]airgap.Accepted, len(entries))
	var mu sync.Mutex
	imported := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(handOffParallelism)
	for i, e := range entries {
		if e.Kind != contract.KindNotification {
			continue
		}
		g.Go(func() error {
			var isNew bool
			var err error
			accepted[i], isNew, err = im.handOffNotification(gctx, e)
			if isNew {
				mu.Lock()
				imported++
				mu.Unlock()
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, imported, err
	}
	n, err := im.mirrorCalls(ctx, entries, calls, accepted)
	return accepted, imported + n, err
}

// handOffNotification starts (or signals) the notification's workflow
// exactly as the site's forwarder does, and returns what the receipt says
// of it: Pending when central takes it now; central's record (status,
// retry count, last attempt, delivery) when central already has it, which
// the site then answers with.
func (im *Importer) handOffNotification(ctx context.Context, e airgap.Entry) (airgap.Accepted, bool, error) {
	accepted := airgap.Accepted{JobID: e.JobID, Kind: e.Kind, Status: string(contract.StatusPending)}
	if row, err := im.Store.GetNotification(ctx, e.JobID); err == nil {
		accepted.Status, accepted.RetryCount = string(row.Status), row.RetryCount
		accepted.LastAttemptAt, accepted.DeliveredAt = row.LastAttemptAt, row.DeliveredAt
		return accepted, false, nil
	} else if !errors.Is(err, centralstore.ErrNotFound) {
		return accepted, false, err
	}
	var sub contract.NotificationSubmission
	if err := json.Unmarshal([]byte(e.Payload), &sub); err != nil {
		return accepted, false, fmt.Errorf("notification %s: payload is not a notification: %w", e.JobID, err)
	}
	if sub.NotificationID != e.JobID {
		return accepted, false, fmt.Errorf("notification %s: its payload names id %s", e.JobID, sub.NotificationID)
	}
	err := retryTransient(ctx, time.Second, func() error {
		_, err := im.Temporal.SignalWithStartWorkflow(ctx, contract.NotificationWorkflowID(sub.NotificationID), contract.SignalSubmit, sub,
			sitedaemon.InRegion(sitedaemon.NotificationStartOptions(sub, im.HideSubject), im.Region), contract.WorkflowNotification)
		return err
	})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		return accepted, false, nil // its workflow ran and closed before its row was read
	case err != nil:
		return accepted, false, fmt.Errorf("hand notification %s to central: %w", e.JobID, err)
	}
	return accepted, true, nil
}

// handOffAttempts bounds the tries of one hand-off.
const handOffAttempts = 5

// retryTransient runs handOff until it succeeds, fails for good (central
// refused the request, or its workflow already ran), or handOffAttempts
// tries failed, waiting wait before the second try and twice as long before
// each next (1, 2, 4 and 8 s from the importer). A busy central answers a call late (each has a 10 s
// deadline) or not at all now and then; one slow call must not fail an
// import of thousands, and trying again is safe: one workflow per id.
func retryTransient(ctx context.Context, wait time.Duration, handOff func() error) error {
	for attempt := 1; ; attempt++ {
		err := handOff()
		var invalid *serviceerror.InvalidArgument
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if err == nil || attempt == handOffAttempts || errors.As(err, &invalid) || errors.As(err, &started) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// mirrorCalls writes the cached calls' states to site_calls (central
// mirrors a call; the site drives it) and fills their accepted entries.
func (im *Importer) mirrorCalls(ctx context.Context, entries []airgap.Entry, calls map[string]contract.TrackedOperation, accepted []airgap.Accepted) (int, error) {
	var rows []contract.TrackedOperation
	for i, e := range entries {
		if e.Kind == contract.KindNotification {
			continue
		}
		row, ok := calls[e.JobID]
		if !ok {
			return 0, fmt.Errorf("cached call %s: the bundle carries no tracking state for it", e.JobID)
		}
		rows = append(rows, row)
		accepted[i] = airgap.Accepted{JobID: e.JobID, Kind: e.Kind, Status: string(row.Status)}
	}
	if len(rows) == 0 {
		return 0, nil
	}
	if _, err := im.Store.UpsertSiteCalls(ctx, rows); err != nil {
		return 0, fmt.Errorf("mirror %d cached calls: %w", len(rows), err)
	}
	return len(rows), nil
}

// record stores the import run and each bundle it imported, so importing
// a bundle again changes nothing.
func (im *Importer) record(ctx context.Context, bundles []Bundle, res ImportResult, opts ImportOptions, took time.Duration) error {
	imported := make([]centralstore.AirgapImport, len(bundles))
	for i, b := range bundles {
		imp := centralstore.AirgapImport{
			BundleID: b.BundleID, SiteID: b.TenantID, Entries: entryCount(b.Bundle),
			ImportedBy: opts.By, ImportedAt: opts.Now, Bytes: b.Bytes,
		}
		for _, l := range b.JobLogs {
			imp.Nodes = append(imp.Nodes, l.NodeID)
			imp.ChainHeads = append(imp.ChainHeads, l.NodeID+"="+l.ChainHead)
		}
		// Merged bundles share one outcome, which no bundle owns: the
		// counts go on the bundle's record only when the import had one
		// bundle (the run's record has them always).
		if len(bundles) == 1 {
			imp.Imported, imp.Duplicates, imp.Skipped = res.Imported, res.Duplicates, res.SkippedEntries
		}
		imported[i] = imp
	}
	return im.Store.RecordAirgapImport(ctx, newRun(centralstore.AirgapImported, res, opts, took), imported...)
}

func callStatesOf(bundles []Bundle) map[string]contract.TrackedOperation {
	calls := map[string]contract.TrackedOperation{}
	for _, b := range bundles {
		for _, c := range b.Calls {
			if prev, ok := calls[c.OperationID]; !ok || c.Seq > prev.Seq {
				calls[c.OperationID] = c // the latest state the site exported
			}
		}
	}
	return calls
}

func entryCount(b airgap.Bundle) int {
	n := 0
	for _, l := range b.JobLogs {
		n += len(l.Entries)
	}
	return n
}

// contents is the decoded bundles of bundles.
func contents(bundles []Bundle) []airgap.Bundle {
	out := make([]airgap.Bundle, len(bundles))
	for i, b := range bundles {
		out[i] = b.Bundle
	}
	return out
}

func bundleIDs(bundles []Bundle) []string {
	ids := make([]string, len(bundles))
	for i, b := range bundles {
		ids[i] = b.BundleID
	}
	sort.Strings(ids)
	return ids
}
