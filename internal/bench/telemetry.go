package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
)

// telemetrySites is how many sites the telemetry section's changes come from.
const telemetrySites = 200

// telemetryRounds is how many rounds each side of the telemetry section
// runs, alternately (A B B A ...): a dev server or a store file that slows
// as it fills weighs on both.
const telemetryRounds = 4

// telemetry times TelemetryRows tracking changes of telemetrySites sites
// reaching central's site_calls the way site daemons send them
// (sitedaemon.IngestSender, one a site: a signal per batch of
// site.telemetry_batch rows to the site's ingest workflow shard, the
// central worker in process, Parallelism batches in flight) against the store's bulk upsert of as many other rows
// in the same batches, one batch at a time, on the same store file.
func (r *run) telemetry(ctx context.Context) (rows []Row, err error) {
	srv, err := r.startTemporal(ctx, "telemetry")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, srv.stop()) }()
	cfg := r.centralConfig(0) // telemetry sends no mail
	cfg.Store.Path = r.path("telemetry-central.db")
	e := &endToEnd{tc: srv.client()}
	if err := e.startCentral(ctx, cfg); err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	store, err := centralstore.OpenSQLite(ctx, cfg.Store.Path)
	if err != nil {
		return nil, err
	}
	defer store.Close()

	n, size := r.opts.TelemetryRows, config.Default().Site.TelemetryBatch
	ingested, upserted := telemetryBatches("ingested", n, size), telemetryBatches("upserted", n, size)
	r.step("telemetry: %s tracking changes from %d sites in batches of %d, through Temporal (%d in flight) and as bulk upserts, %d rounds each",
		thousands(int64(n)), telemetrySites, size, r.opts.Parallelism, telemetryRounds)
	senders := newSiteSenders(srv.client())
	times, err := alternate(telemetryRounds,
		func(round int) (time.Duration, error) {
			return ingestRound(ctx, senders, store, "ingested", roundOf(ingested, round), r.opts.Parallelism)
		},
		func(round int) (time.Duration, error) {
			return timeBatches(ctx, roundOf(upserted, round), 1, func(ctx context.Context, b contract.TelemetryBatch) error {
				_, err := store.UpsertSiteCalls(ctx, b.Rows)
				return err
			})
		})
	if err != nil {
		return nil, err
	}
	viaTemporal, raw := times[0], times[1]
	if err := requireMirrored(ctx, store, "ingested", ingested); err != nil {
		return nil, err
	}
	// What the store allows the ingest: the same upserts with the audit
	// events of every change, as MirrorSiteCalls writes them, as many at a
	// time as the ingest (the batches that wait share a transaction). And
	// the bulk upserts the same way, so the details show what merging buys
	// either side.
	par := r.opts.Parallelism
	audited, err := timeBatches(ctx, telemetryBatches("audited", n, size), par, func(ctx context.Context, b contract.TelemetryBatch) error {
		_, err := store.UpsertSiteCallsAudited(ctx, b.Rows, audit.SiteCallChanges)
		return err
	})
	if err != nil {
		return nil, err
	}
	merged, err := timeBatches(ctx, telemetryBatches("merged", n, size), par, func(ctx context.Context, b contract.TelemetryBatch) error {
		_, err := store.UpsertSiteCalls(ctx, b.Rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	baseline := Figure{Name: "bulk upsert of as many rows, 1 writer", Value: perSecond(n, raw.total()), Unit: "/s"}
	row := compare(SectionTelemetry, fmt.Sprintf("telemetry ingest, %d sites", telemetrySites), perSecond(n, viaTemporal.total()), "/s", baseline)
	return []Row{row.atLeastRatio(0.9).withDetail("%s changes in batches of %d: through Temporal %s (rounds %s), bulk upserts one at a time %s (rounds %s); "+
		"once after, %d at a time as the ingest sends them (batches waiting for the store's turn share a transaction): "+
		"the upserts with every change's audit events, as the ingest writes them, %s (%s, %.2f× the bulk upserts), the bulk upserts %s (%s)",
		thousands(int64(n)), size, viaTemporal.total().Round(time.Millisecond), viaTemporal, raw.total().Round(time.Millisecond), raw,
		par, audited.Round(time.Millisecond), formatValue(perSecond(n, audited), "/s"), raw.total().Seconds()/audited.Seconds(),
		merged.Round(time.Millisecond), formatValue(perSecond(n, merged), "/s"))}, nil
}

// telemetryBatches is n tracking changes of new cached calls, named after
// side, in batches of size, each batch from one of telemetrySites sites
// (also named after side: central keeps a cursor per site), sites in turn, each
// site's changes numbered upwards as a site's are. The sites work at once,
// as a fleet does: a batch's calls were made over the same milliseconds as
// every other batch's, so their ids (version 7 UUIDs, in time order) lie
// among the others' in the key, not in one run of it.
func telemetryBatches(side string, n, size int) []contract.TelemetryBatch {
	var batches []contract.TelemetryBatch
	seq := make([]int64, telemetrySites)
	start := time.Now().UTC()
	for done := 0; done < n; done += size {
		site := len(batches) % telemetrySites
		siteID := fmt.Sprintf("%s-site-%03d", side, site)
		rows := make([]contract.TrackedOperation, min(size, n-done))
		for i := range rows {
			seq[site]++
			at := start.Add(time.Duration(i) * time.Millisecond)
			rows[i] = contract.TrackedOperation{
				OperationID: side + "-" + idAt(at), Kind: contract.KindExternalCall,
				Target: benchSystem + "." + benchMethod, Status: contract.StatusDelivered, SourceSiteID: siteID,
				SourceNode: benchNode, SourceScript: benchScript, CreatedAt: at, UpdatedAt: at, Seq: seq[site],
			}
		}
		batches = append(batches, contract.TelemetryBatch{SiteID: siteID, Rows: rows})
	}
	return batches
}

// roundOf is round's share of batches.
func roundOf(batches []contract.TelemetryBatch, round int) []contract.TelemetryBatch {
	return batches[len(batches)*round/telemetryRounds : len(batches)*(round+1)/telemetryRounds]
}

// timeBatches sends every batch, parallel at once, and returns how long
// they took.
func timeBatches(ctx context.Context, batches []contract.TelemetryBatch, parallel int, send func(context.Context, contract.TelemetryBatch) error) (time.Duration, error) {
	start := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for _, b := range batches {
		g.Go(func() error { return send(ctx, b) })
	}
	err := g.Wait()
	return time.Since(start), err
}

// siteSenders are the sites' telemetry senders, one a site as each site
// daemon has its own, kept over the rounds: a sender paces its questions
// to central by how long its last batch took to be written.
type siteSenders struct {
	tc     client.Client
	mu     sync.Mutex
	bySite map[string]*siteSender
}

// siteSender is one site's sender; a site sends one batch at a time.
type siteSender struct {
	mu     sync.Mutex
	sender *sitedaemon.IngestSender
}

func newSiteSenders(tc client.Client) *siteSenders {
	return &siteSenders{tc: tc, bySite: map[string]*siteSender{}}
}

// send sends batch as its site's daemon does, after any batch of the site
// still under way.
func (ss *siteSenders) send(ctx context.Context, batch contract.TelemetryBatch) error {
	ss.mu.Lock()
	site, ok := ss.bySite[batch.SiteID]
	if !ok {
		site = &siteSender{sender: sitedaemon.NewIngestSender(ss.tc, contract.Region{})}
		ss.bySite[batch.SiteID] = site
	}
	ss.mu.Unlock()
	site.mu.Lock()
	defer site.mu.Unlock()
	return site.sender.Send(ctx, batch, true) // compressed, as for workers of this generation
}

// ingestRound sends batches as site daemons do (sitedaemon.IngestSender,
// parallel at once) and returns how long until central's store held every
// row of them: Temporal has a batch before central wrote it.
func ingestRound(ctx context.Context, senders *siteSenders, store *centralstore.Store, side string, batches []contract.TelemetryBatch, parallel int) (time.Duration, error) {
	before, err := countMirrored(ctx, store, side)
	if err != nil {
		return 0, err
	}
	want := before
	for _, b := range batches {
		want += len(b.Rows)
	}
	start := time.Now()
	_, err = timeBatches(ctx, batches, parallel, senders.send)
	if err != nil {
		return 0, err
	}
	for {
		got, err := countMirrored(ctx, store, side)
		switch {
		case err != nil:
			return 0, err
		case got >= want:
			return time.Since(start), nil
		case time.Since(start) > 5*time.Minute:
			return 0, fmt.Errorf("telemetry: %d of %d %s changes reached site_calls in 5 minutes", got-before, want-before, side)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// requireMirrored checks that every change of side's batches reached
// site_calls: a rate of rows that were lost would mean nothing.
func requireMirrored(ctx context.Context, store *centralstore.Store, side string, batches []contract.TelemetryBatch) error {
	want := 0
	for _, b := range batches {
		want += len(b.Rows)
	}
	got, err := countMirrored(ctx, store, side)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("telemetry: %d of %d %s changes reached site_calls", got, want, side)
	}
	return nil
}

// countMirrored is how many of side's changes site_calls holds.
func countMirrored(ctx context.Context, store *centralstore.Store, side string) (int, error) {
	var got int
	err := store.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM site_calls WHERE operation_id LIKE '`+side+`-%'`).Scan(&got)
	if err != nil {
		return 0, fmt.Errorf("telemetry: count the %s changes: %w", side, err)
	}
	return got, nil
}
