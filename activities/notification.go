// Package activities holds the I/O behind Outpost's workflows. Permanent
// failures are classified here, once, as non-retryable application errors.
package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/mailer"
)

// Sender sends one email; *mailer.Mailer in production.
type Sender interface {
	Send(ctx context.Context, e mailer.Email) error
}

// Lists resolves a notification list name to its recipients, at delivery time.
type Lists func(name string) (recipients []string, ok bool)

// NotificationActivities delivers notifications and keeps the central
// notifications table.
type NotificationActivities struct {
	Store  *centralstore.Store
	Sender Sender
	Lists  Lists
	// Policy is the SMTP retry policy (interval, max retries, attempt timeout).
	Policy contract.RetryPolicy
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Observe is told of the audit events stored with each change.
	Observe EventObserver
}

func (a *NotificationActivities) now() time.Time { return utcNow(a.Now) }

// utcNow reads the injected clock, time.Now when nil, in UTC.
func utcNow(clock func() time.Time) time.Time {
	if clock == nil {
		return time.Now().UTC()
	}
	return clock().UTC()
}

// RecordNotification inserts the central row unless it exists, and returns
// the stored row with the retry policy in force.
func (a *NotificationActivities) RecordNotification(ctx context.Context, sub contract.NotificationSubmission) (contract.RecordNotificationResult, error) {
	n := centralstore.Notification{
		NotificationID:   sub.NotificationID,
		Type:             centralstore.NotificationTypeEmail,
		ListName:         sub.ListName,
		Subject:          sub.Subject,
		Body:             sub.Body,
		Status:           contract.StatusPending,
		SourceSiteID:     sub.SourceSiteID,
		SourceInstanceID: sub.SourceInstanceID,
		SourceScript:     sub.SourceScript,
		SourceNode:       sub.SourceNode,
		SiteEnqueuedAt:   sub.SiteEnqueuedAt,
		CreatedAt:        a.now(),
	}
	enqueued := audit.NotificationEnqueued(n)
	row, err := a.Store.InsertNotification(ctx, n, enqueued)
	if err != nil {
		return contract.RecordNotificationResult{}, err
	}
	a.Observe.observe(enqueued)
	return contract.RecordNotificationResult{State: StateOf(row), Policy: a.Policy}, nil
}

// DeliverNotification makes one delivery attempt and records a success.
func (a *NotificationActivities) DeliverNotification(ctx context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
	row, err := a.Store.GetNotification(ctx, in.NotificationID)
	if err != nil {
		return contract.DeliverNotificationResult{}, err
	}
	if row.Status == contract.StatusDelivered {
		// An earlier attempt sent it and recorded it (with its audit
		// events) but its completion was lost: never send twice.
		return contract.DeliverNotificationResult{DeliveredAt: *row.DeliveredAt, ResolvedTargets: row.ResolvedTargets}, nil
	}
	recipients, err := a.resolve(row.ListName)
	if err != nil {
		return contract.DeliverNotificationResult{}, err
	}
	err = a.Sender.Send(ctx, mailer.Email{ID: row.NotificationID, To: recipients, Subject: row.Subject, Body: row.Body})
	if err != nil {
		return contract.DeliverNotificationResult{}, classifySendError(row.NotificationID, err)
	}
	at := a.now()
	res := contract.DeliverNotificationResult{DeliveredAt: at, ResolvedTargets: recipients}
	events := audit.NotificationDelivered(row.NotificationID, row.SourceSiteID, row.SourceNode, in.Attempt, in.RetryCount, at, recipients)
	if err := a.Store.MarkNotificationDelivered(ctx, row.NotificationID, at, recipients, events...); err != nil {
		// The email is gone: a failure now would have it sent again. The
		// workflow records the delivery and its events instead, retrying
		// until the store answers.
		activity.GetLogger(ctx).Warn("notification sent but not marked delivered; the workflow will record it",
			"notification", row.NotificationID, "error", err)
		res.Unrecorded = true
		return res, nil
	}
	// A failed attempt is audited by UpdateNotification: the workflow sees
	// every failure, timeouts included.
	a.Observe.observe(events...)
	return res, nil
}

// UpdateNotification writes a status change decided by the workflow, then
// audits the attempt or operator action it records.
func (a *NotificationActivities) UpdateNotification(ctx context.Context, upd contract.NotificationUpdate) error {
	if upd.At.IsZero() {
		upd.At = a.now()
	}
	events := audit.NotificationUpdated(upd)
	if err := a.applyUpdate(ctx, upd, events); err != nil {
		return err
	}
	a.Observe.observe(events...)
	return nil
}

// applyUpdate writes upd to the row. The workflow retries a failed write
// until the store answers, so a refusal because the row is terminal must
// not be retried: it is success when the row already has upd's status (an
// earlier run of this write committed, but its result was lost), and
// otherwise a non-retryable TerminalRow failure whose details are the row's
// state, which the workflow adopts: an attempt that delivered the email and
// marked the row, but whose completion was lost, ends Delivered.
func (a *NotificationActivities) applyUpdate(ctx context.Context, upd contract.NotificationUpdate, events []centralstore.AuditEvent) error {
	err := a.writeUpdate(ctx, upd, events)
	if !errors.Is(err, centralstore.ErrTerminal) {
		return err
	}
	row, readErr := a.Store.GetNotification(ctx, upd.NotificationID)
	if readErr != nil {
		return readErr
	}
	if row.Status == upd.Status {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(err.Error(), contract.ErrTypeTerminalRow, err, StateOf(row))
}

// writeUpdate is the store write of upd with its events: a Delivered row
// also gets its delivery time and recipients.
func (a *NotificationActivities) writeUpdate(ctx context.Context, upd contract.NotificationUpdate, events []centralstore.AuditEvent) error {
	if upd.Status == contract.StatusDelivered {
		return a.Store.MarkNotificationDelivered(ctx, upd.NotificationID, upd.DeliveredAt, upd.ResolvedTargets, events...)
	}
	return a.Store.UpdateNotificationStatus(ctx, upd, events...)
}

func (a *NotificationActivities) resolve(list string) ([]string, error) {
	recipients, ok := a.Lists(list)
	if !ok {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("notification list %q is not defined in the central config (central.lists)", list),
			contract.ErrTypeUnknownList, nil)
	}
	if len(recipients) == 0 {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("notification list %q has no recipients", list), contract.ErrTypeNoRecipients, nil)
	}
	return recipients, nil
}

func classifySendError(id string, err error) error {
	var sendErr *mailer.SendError
	if errors.As(err, &sendErr) && sendErr.Uncertain {
		return temporal.NewNonRetryableApplicationError("delivery uncertain: the SMTP server received the whole message "+
			"but did not confirm it within central.smtp.final_reply_timeout, so it may have been delivered; "+
			"check a recipient's mailbox for Message-ID <"+id+"@outpost>, then retry (sends again) or discard: "+err.Error(),
			contract.ErrTypeUncertain, err)
	}
	if errors.As(err, &sendErr) && sendErr.Permanent {
		return temporal.NewNonRetryableApplicationError("smtp rejected the message: "+err.Error(), contract.ErrTypeRejected, err)
	}
	return fmt.Errorf("smtp send: %w", err)
}

// LookupNotification reads a notification's central row as its status; an
// id central has no row for fails non-retryable, ErrTypeNotFound.
func (a *NotificationActivities) LookupNotification(ctx context.Context, id string) (contract.NotificationState, error) {
	row, err := a.Store.GetNotification(ctx, id)
	if errors.Is(err, centralstore.ErrNotFound) {
		return contract.NotificationState{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("central has no notification %s", id), contract.ErrTypeNotFound, err)
	}
	if err != nil {
		return contract.NotificationState{}, fmt.Errorf("look up notification %s: %w", id, err)
	}
	return StateOf(row), nil
}

// StateOf is the workflow's view of a central row.
func StateOf(n centralstore.Notification) contract.NotificationState {
	return contract.NotificationState{
		NotificationID: n.NotificationID, Status: n.Status, RetryCount: n.RetryCount, LastError: n.LastError,
		ResolvedTargets: n.ResolvedTargets, SiteEnqueuedAt: n.SiteEnqueuedAt, CreatedAt: n.CreatedAt,
		LastAttemptAt: n.LastAttemptAt, NextAttemptAt: n.NextAttemptAt, DeliveredAt: n.DeliveredAt,
	}
}
