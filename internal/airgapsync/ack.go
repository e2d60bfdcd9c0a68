package airgapsync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/airgap"
	"github.com/outpost-dev/outpost/internal/hlc"
	"github.com/outpost-dev/outpost/internal/sitestore"
)

// AckOptions says how to settle a receipt on a site.
type AckOptions struct {
	Verify airgap.VerifyOptions
	// Site is this site's id: a receipt for another site is refused.
	Site string
	// Node is the node whose clock takes the receipt's time.
	Node string
	// MaxClockOffset bounds how far ahead of this node's clock the
	// receipt's time may be and still be adopted.
	MaxClockOffset time.Duration
	Now            time.Time
}

// AckResult is what a receipt settled.
type AckResult struct {
	ReceiptID string `json:"receiptId"`
	// Settled is how many operations this receipt settled now;
	// AlreadySettled how many it names that were settled before.
	Settled        int `json:"settled"`
	AlreadySettled int `json:"alreadySettled"`
	// ClockRefused is set when the receipt's time was too far ahead to
	// adopt (the operations are settled all the same).
	ClockRefused string `json:"clockRefused,omitempty"`
}

// Ack verifies receipt and settles what it names: notifications leave the
// buffer (the forwarder never sends them again), every entry records
// central's state, and the node's clock moves past central's. The ack is
// recorded (size, duration, operations settled now) for the site's metrics.
func Ack(ctx context.Context, store *sitestore.Store, receipt Receipt, opts AckOptions) (AckResult, error) {
	started := time.Now()
	res, err := settle(ctx, store, receipt.Receipt, opts)
	if err != nil {
		return res, err
	}
	ack := sitestore.Transfer{BundleID: receipt.ReceiptID, Entries: len(receipt.Accepted), NewEntries: res.Settled,
		Bytes: receipt.Bytes, Duration: time.Since(started), At: opts.Now, ClockRefused: res.ClockRefused != ""}
	if err := store.RecordAck(ctx, ack); err != nil {
		return res, fmt.Errorf("receipt %s is settled, but: %w", receipt.ReceiptID, err)
	}
	return res, nil
}

// settle is Ack without its record.
func settle(ctx context.Context, store *sitestore.Store, receipt airgap.Receipt, opts AckOptions) (AckResult, error) {
	res := AckResult{ReceiptID: receipt.ReceiptID}
	if err := airgap.VerifyReceipt(receipt, opts.Verify); err != nil {
		return res, fmt.Errorf("receipt %s: %w", receipt.ReceiptID, err)
	}
	if receipt.TenantID != opts.Site {
		return res, fmt.Errorf("receipt %s is for site %q; this is site %q", receipt.ReceiptID, receipt.TenantID, opts.Site)
	}
	ops := make([]sitestore.Settled, len(receipt.Accepted))
	for i, a := range receipt.Accepted {
		ops[i] = sitestore.Settled{ID: a.JobID, Kind: a.Kind, Status: contract.Status(a.Status),
			RetryCount: a.RetryCount, LastAttemptAt: a.LastAttemptAt, DeliveredAt: a.DeliveredAt}
	}
	settled, err := store.SettleByReceipt(ctx, opts.Now, receipt.CreatedAt, ops)
	if err != nil {
		return res, err
	}
	res.Settled, res.AlreadySettled = settled, len(ops)-settled
	centralTime := hlc.Timestamp{Physical: receipt.CreatedAt.UnixMilli()}
	err = store.ReceiveClock(ctx, opts.Node, centralTime, opts.MaxClockOffset)
	switch {
	case errors.Is(err, hlc.ErrTooFarAhead):
		res.ClockRefused = err.Error()
	case err != nil:
		return res, err
	}
	return res, nil
}
