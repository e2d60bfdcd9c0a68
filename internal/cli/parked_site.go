package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/operator"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// parkedOnSite is the site store the config names, for the operations
// parked there: hand-offs central refused for good (over a size limit).
// The parked commands read and requeue them beside central's. It is nil
// on a host without that file (a central host), so nothing is created.
type parkedOnSite struct {
	store *sitestore.Store
	// region is the site's (site.region): its parked operations are that
	// region's.
	region string
}

// openParkedOnSite opens the site store of cfg when its file exists.
func openParkedOnSite(ctx context.Context, cfg config.Site) (*parkedOnSite, error) {
	if cfg.Store == "" {
		return &parkedOnSite{}, nil
	}
	if _, err := os.Stat(cfg.Store); errors.Is(err, os.ErrNotExist) {
		return &parkedOnSite{}, nil
	}
	store, err := sitestore.Open(ctx, cfg.Store, sitestore.Options{})
	if err != nil {
		return nil, fmt.Errorf("read what is parked on the site (site.store %s): %w", cfg.Store, err)
	}
	return &parkedOnSite{store: store, region: cfg.Region}, nil
}

func (p *parkedOnSite) close() {
	if p.store != nil {
		_ = p.store.Close()
	}
}

// list returns the operations parked on the site that pass f.
func (p *parkedOnSite) list(ctx context.Context, f operator.Filter, now time.Time) ([]operator.Item, error) {
	if p.store == nil {
		return nil, nil
	}
	rows, err := p.store.ListParkedOnSite(ctx)
	if err != nil {
		return nil, err
	}
	var items []operator.Item
	for _, m := range rows {
		it := operator.Item{
			Kind: m.Category, ID: m.ID, Site: m.Provenance.SiteID, Target: m.Target, Status: contract.StatusParked,
			ReceivedAt: m.CreatedAt, ParkedAt: m.LastAttemptAt, RetryCount: m.RetryCount, LastError: m.LastError,
			ParkedOn: "site", Region: p.region,
		}
		if f.Matches(it, now) {
			items = append(items, it)
		}
	}
	return items, nil
}

// pick splits ids into the operations parked on this site and the rest,
// which are central's to resolve.
func (p *parkedOnSite) pick(ctx context.Context, ids []string) (onSite []operator.Item, rest []string, err error) {
	parked, err := p.list(ctx, operator.Filter{}, time.Time{})
	if err != nil {
		return nil, nil, err
	}
	byID := map[string]operator.Item{}
	for _, it := range parked {
		byID[it.ID] = it
	}
	for _, id := range ids {
		if it, ok := byID[operator.OperationID(id)]; ok {
			onSite = append(onSite, it)
			delete(byID, it.ID)
			continue
		}
		rest = append(rest, id)
	}
	return onSite, rest, nil
}

// requeue makes each item due for hand-off again, noting who and why.
func (p *parkedOnSite) requeue(ctx context.Context, items []operator.Item, action contract.OperatorAction, now time.Time) []operator.Outcome {
	note := fmt.Sprintf("requeued on the site by %s", orDash(action.Operator))
	if action.Reason != "" {
		note += ": " + action.Reason
	}
	out := make([]operator.Outcome, 0, len(items))
	for _, it := range items {
		err := p.store.RequeueParked(ctx, it.ID, now, note)
		if errors.Is(err, sitestore.ErrNotFound) {
			out = append(out, operator.Outcome{Item: it, Note: "no longer parked on the site"})
			continue
		}
		out = append(out, operator.Outcome{Item: it, Failed: err})
	}
	return out
}
