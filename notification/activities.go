// Package notification is a notification's delivery at central: the
// workflow (Workflow) and the activities it runs, which
// record the central row and pick, by the list's type, the adapter that
// delivers (Email over SMTP, Teams, Webhook); the adapters; and the rules a
// list or channel definition follows. An adapter's failure says whether it
// is permanent; the activity turns it into Temporal's retryable or
// non-retryable error at its boundary (classifyDeliveryError).
package notification

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/activities/heartbeat"
	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/audit"
	"github.com/outpost-dev/outpost/internal/centralstore"
	"github.com/outpost-dev/outpost/internal/targets"
	"github.com/outpost-dev/outpost/temporalcontract"
)

// Activities delivers notifications and keeps the central notifications
// table. Workers register it; activity names are its method names.
type Activities struct {
	Store *centralstore.Store
	// Adapters deliver each notification type; the list named by a
	// notification, read from Store at every attempt, picks one.
	Adapters Adapters
	// Link is a notification's address in the Temporal Web UI, for Teams
	// cards and webhook payloads; none when nil.
	Link func(notificationID string) string
	// Policy is the retry policy (interval, max retries, attempt timeout).
	Policy contract.RetryPolicy
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// now reads the injected clock, time.Now when nil, in UTC.
func (a *Activities) now() time.Time {
	if a.Now == nil {
		return time.Now().UTC()
	}
	return a.Now().UTC()
}

// Message is one attempt to deliver a notification, as the adapters take
// it: the notification, its list's targets resolved for this attempt, and
// the list's channel.
type Message struct {
	ID             string // the notification id
	Subject        string
	Body           string
	SourceSite     string
	SourceInstance string
	SourceScript   string
	SiteEnqueuedAt time.Time
	// List names the notification's list; ListData is its type data
	// (TeamsData, WebhookData) as JSON, "" for none.
	List     string
	ListData string
	// Targets are the list's targets with every env: target read from the
	// environment.
	Targets []string
	// Channel is the list's delivery channel; nil when it names none.
	Channel *Channel
	// Link opens the notification in the Temporal Web UI ("" when unknown).
	Link string
}

// Channel is a list's delivery channel as an adapter reads it.
type Channel struct {
	Name string
	// Settings are its SMTPSettings or WebhookSettings as JSON.
	Settings string
}

// Adapter delivers notifications of one type.
type Adapter interface {
	Deliver(ctx context.Context, m Message) error
}

// Adapters maps a notification type to its adapter.
type Adapters map[string]Adapter

// For is the adapter of list, of type listType; a type this worker cannot
// deliver is a permanent *targets.Failure.
func (a Adapters) For(listType, list string) (Adapter, error) {
	adapter, ok := a[listType]
	if !ok {
		return nil, &targets.Failure{Permanent: true, Err: fmt.Errorf("list %q has type %q, which this central worker cannot deliver (it knows %s)",
			list, listType, strings.Join(contract.NotificationTypes(), ", "))}
	}
	return adapter, nil
}

// RecordNotification inserts the central row unless it exists, and returns
// the stored row with the retry policy in force.
func (a *Activities) RecordNotification(ctx context.Context, sub contract.NotificationSubmission) (contract.RecordNotificationResult, error) {
	list, err := a.findList(ctx, sub.ListName)
	if err != nil {
		return contract.RecordNotificationResult{}, err
	}
	row, _, err := a.record(ctx, sub, list)
	if err != nil {
		return contract.RecordNotificationResult{}, err
	}
	return a.recorded(row), nil
}

// recorded is what the workflow takes from a recorded row: its state and
// the policy in force.
func (a *Activities) recorded(row centralstore.Notification) contract.RecordNotificationResult {
	return contract.RecordNotificationResult{State: StateOf(row), Policy: a.Policy}
}

// record inserts the central row of sub unless it exists, with its Enqueued
// event, and returns the stored row and whether it inserted it. The row
// takes the type of list, its notification list (nil: not there, yet; see
// listType).
func (a *Activities) record(ctx context.Context, sub contract.NotificationSubmission, list *centralstore.List) (centralstore.Notification, bool, error) {
	typ, typeData := listType(list)
	n := centralstore.Notification{
		NotificationID:   sub.NotificationID,
		Type:             typ,
		TypeData:         typeData,
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
	return a.Store.InsertNotification(ctx, n, audit.NotificationEnqueued(n, sub.SubmittedBy))
}

// listType is the type and type data of list, recorded with a new
// notification; an Email with none when the list does not exist (yet: the
// delivery attempt will say so).
func listType(list *centralstore.List) (string, string) {
	if list == nil {
		return contract.NotificationTypeEmail, "{}"
	}
	return list.Type, list.TypeData
}

// findList reads the notification list named name as it is now; nil when
// there is none.
func (a *Activities) findList(ctx context.Context, name string) (*centralstore.List, error) {
	list, err := a.Store.GetList(ctx, name)
	if errors.Is(err, centralstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &list, nil
}

// RecordAndDeliverNotification is a notification's first delivery attempt:
// it records the central row (RecordNotification) and delivers
// (DeliverNotification) in one activity, which spares the workflow a local
// activity, a billable action, per notification. It answers the row as
// recorded and the delivery. A row that is not Pending (a previous run's:
// terminal, Retrying or Parked) is not attempted: the workflow decides, as
// after RecordNotification. A failure to record fails RowUnrecorded,
// nothing attempted; a failed attempt carries the recorded row in its
// details.
func (a *Activities) RecordAndDeliverNotification(ctx context.Context, in contract.RecordAndDeliverInput) (contract.RecordAndDeliverResult, error) {
	defer heartbeat.While(ctx)()
	// One read of the list serves the row's type and the attempt.
	list, err := a.findList(ctx, in.Submission.ListName)
	var row centralstore.Notification
	if err == nil {
		row, err = a.recordFirstAttempt(ctx, in, list)
	}
	if err != nil {
		return contract.RecordAndDeliverResult{}, temporal.NewApplicationErrorWithCause(
			"record notification "+in.Submission.NotificationID, contract.ErrTypeRowUnrecorded, err)
	}
	res := contract.RecordAndDeliverResult{Recorded: a.recorded(row)}
	if row.Status != contract.StatusPending {
		return res, nil
	}
	delivery, err := a.deliver(ctx, row, list, contract.DeliverNotificationInput{
		NotificationID: row.NotificationID, RetryCount: row.RetryCount, Attempt: in.Attempt,
	})
	if err != nil {
		return contract.RecordAndDeliverResult{}, temporalcontract.WithRecorded(err, res.Recorded)
	}
	res.Delivery = &delivery
	return res, nil
}

// recordFirstAttempt records the central row before the first attempt. A
// row already there and Pending was recorded by this same first attempt,
// run before by a worker that stopped (killed, or cut off) before its
// workflow task ended, so the workflow runs it again: that lost run may
// have reached the receiver, and the trail says so with an event of its
// own (audit.NotificationAttemptLost) before this run's outcome.
func (a *Activities) recordFirstAttempt(ctx context.Context, in contract.RecordAndDeliverInput, list *centralstore.List) (centralstore.Notification, error) {
	row, inserted, err := a.record(ctx, in.Submission, list)
	if err != nil || inserted || row.Status != contract.StatusPending {
		return row, err
	}
	if _, err := a.Store.InsertAuditEvents(ctx, []centralstore.AuditEvent{audit.NotificationAttemptLost(row, in.Attempt, a.now())}); err != nil {
		return row, fmt.Errorf("record the lost run of attempt %d: %w", in.Attempt, err)
	}
	return row, nil
}

// DeliverNotification makes one delivery attempt and records a success. It
// heartbeats while it works: a worker that dies mid-attempt is seen gone
// within heartbeat.Timeout.
func (a *Activities) DeliverNotification(ctx context.Context, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
	defer heartbeat.While(ctx)()
	row, err := a.Store.GetNotification(ctx, in.NotificationID)
	if err != nil {
		return contract.DeliverNotificationResult{}, err
	}
	if row.Status == contract.StatusDelivered {
		// An earlier attempt sent it and recorded it (with its audit
		// events) but its completion was lost: never send twice.
		return contract.DeliverNotificationResult{DeliveredAt: *row.DeliveredAt, ResolvedTargets: row.ResolvedTargets}, nil
	}
	list, err := a.findList(ctx, row.ListName)
	if err != nil {
		return contract.DeliverNotificationResult{}, err
	}
	return a.deliver(ctx, row, list, in)
}

// deliver makes attempt in of row to list, its notification list as read
// for this attempt (nil: there is none), and marks the row Delivered on
// success.
func (a *Activities) deliver(ctx context.Context, row centralstore.Notification, list *centralstore.List, in contract.DeliverNotificationInput) (contract.DeliverNotificationResult, error) {
	msg, err := a.resolve(ctx, row, list)
	if err != nil {
		return contract.DeliverNotificationResult{}, err
	}
	adapter, err := a.Adapters.For(list.Type, list.Name)
	if err == nil {
		err = adapter.Deliver(ctx, msg)
	}
	if err != nil {
		return contract.DeliverNotificationResult{}, classifyDeliveryError(row.NotificationID, list, err)
	}
	// The list's targets as written: an env: target's value may be a secret.
	recipients := list.Targets
	at := a.now()
	res := contract.DeliverNotificationResult{DeliveredAt: at, ResolvedTargets: recipients}
	events := audit.NotificationDeliveredRows(row.NotificationID, row.SourceSiteID, row.SourceNode, in.Attempt, in.RetryCount, at, recipients)
	if err := a.Store.MarkNotificationDelivered(ctx, row.NotificationID, at, recipients, events...); err != nil {
		// The email is gone: a failure now would have it sent again. The
		// workflow records the delivery and its events instead, retrying
		// until the store answers.
		activity.GetLogger(ctx).Warn("notification sent but not marked delivered; the workflow will record it",
			"notification", row.NotificationID, "error", err)
		res.Unrecorded = true
	}
	// A failed attempt is audited by UpdateNotification: the workflow sees
	// every failure, timeouts included.
	return res, nil
}

// UpdateNotification writes a status change decided by the workflow, then
// audits the attempt or operator action it records.
func (a *Activities) UpdateNotification(ctx context.Context, upd contract.NotificationUpdate) error {
	if upd.At.IsZero() {
		upd.At = a.now()
	}
	return a.applyUpdate(ctx, upd, audit.NotificationUpdatedRows(upd))
}

// applyUpdate writes upd to the row. The workflow retries a failed write
// until the store answers, so a refusal because the row is terminal must
// not be retried: it is success when the row already has upd's status (an
// earlier run of this write committed, but its result was lost), and
// otherwise a non-retryable TerminalRow failure whose details are the row's
// state, which the workflow adopts: an attempt that delivered the email and
// marked the row, but whose completion was lost, ends Delivered.
func (a *Activities) applyUpdate(ctx context.Context, upd contract.NotificationUpdate, events []centralstore.AuditEvent) error {
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
func (a *Activities) writeUpdate(ctx context.Context, upd contract.NotificationUpdate, events []centralstore.AuditEvent) error {
	if upd.Status == contract.StatusDelivered {
		return a.Store.MarkNotificationDelivered(ctx, upd.NotificationID, upd.DeliveredAt, upd.ResolvedTargets, events...)
	}
	return a.Store.UpdateNotificationStatus(ctx, upd, events...)
}

// resolve takes the notification's list (nil: there is none), its targets
// and its channel as they are at this attempt: a change to the list takes
// effect on the next attempt. What only an operator can fix fails
// non-retryable.
func (a *Activities) resolve(ctx context.Context, n centralstore.Notification, list *centralstore.List) (Message, error) {
	if list == nil {
		return Message{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("notification list %q does not exist at central: create it (outpost lists set), then retry", n.ListName),
			contract.ErrTypeUnknownList, nil)
	}
	if len(list.Targets) == 0 {
		return Message{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("notification list %q has no targets", list.Name), contract.ErrTypeNoRecipients, nil)
	}
	msg := message(n, list.TypeData)
	var err error
	if msg.Targets, err = ResolveTargets(list.Targets); err != nil {
		return Message{}, misconfigured(list.Name, err)
	}
	if list.Channel != "" {
		c, err := a.Store.GetChannel(ctx, list.Channel)
		if errors.Is(err, centralstore.ErrNotFound) {
			return Message{}, misconfigured(list.Name, fmt.Errorf("its channel %q does not exist", list.Channel))
		}
		if err != nil {
			return Message{}, err
		}
		msg.Channel = &Channel{Name: c.Name, Settings: c.Settings}
	}
	if a.Link != nil {
		msg.Link = a.Link(n.NotificationID)
	}
	return msg, nil
}

// message is what the adapters deliver of n, a notification to a list with
// listData as its type data.
func message(n centralstore.Notification, listData string) Message {
	return Message{
		ID: n.NotificationID, Subject: n.Subject, Body: n.Body,
		SourceSite: n.SourceSiteID, SourceInstance: n.SourceInstanceID, SourceScript: n.SourceScript,
		SiteEnqueuedAt: n.SiteEnqueuedAt, List: n.ListName, ListData: listData,
	}
}

func misconfigured(list string, err error) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("notification list %q: %v", list, err), contract.ErrTypeMisconfigured, err)
}

// classifyDeliveryError turns an adapter's failure to deliver notification
// id to list into the activity's, by the failure's verdict: non-retryable
// when permanent or uncertain, and carrying the receiver's Retry-After,
// which the workflow waits at least. An Email list's failures are worded
// as an SMTP server's (rejected; smtp send), the others' as an HTTP
// receiver's (refused). An error that is no failure is returned as is.
func classifyDeliveryError(id string, list *centralstore.List, err error) error {
	var failure *targets.Failure
	if !errors.As(err, &failure) {
		return err
	}
	email := list.Type == contract.NotificationTypeEmail
	switch {
	case failure.Uncertain:
		return temporal.NewNonRetryableApplicationError("delivery uncertain: the SMTP server received the whole message "+
			"but did not confirm it within central.smtp.final_reply_timeout, so it may have been delivered; "+
			"check a recipient's mailbox for Message-ID <"+id+"@outpost>, then retry (sends again) or discard: "+err.Error(),
			contract.ErrTypeUncertain, err)
	case failure.Misconfigured:
		return misconfigured(list.Name, err)
	case failure.Permanent && email:
		return temporal.NewNonRetryableApplicationError("smtp rejected the message: "+err.Error(), contract.ErrTypeRejected, err)
	case failure.Permanent:
		return temporal.NewNonRetryableApplicationError("refused: "+err.Error(), contract.ErrTypeRefused, err)
	case email:
		return fmt.Errorf("smtp send: %w", err)
	case failure.RetryAfter > 0:
		return temporal.NewApplicationErrorWithOptions(err.Error(), contract.ErrTypeDeliveryFailed,
			temporal.ApplicationErrorOptions{Cause: err, NextRetryDelay: failure.RetryAfter})
	}
	return err
}

// LookupNotification reads a notification's central row as its status; an
// id central has no row for fails non-retryable, ErrTypeNotFound.
func (a *Activities) LookupNotification(ctx context.Context, id string) (contract.NotificationState, error) {
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
