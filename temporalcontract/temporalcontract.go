// Package temporalcontract is the part of the contract that needs the
// Temporal SDK: the search-attribute keys every Outpost workflow keeps
// current, the application-error helpers a first notification attempt
// and its workflow share, and a telemetry batch's payload as sites signal
// it and central workers decode it. Package contract stays standard-library only, so
// a script that imports the site SDK links none of the Temporal SDK; the
// workflows, activities, workers and operator tools import this beside it.
package temporalcontract

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/outpost-dev/outpost/contract"
)

// Search attributes (all Keyword) kept current by every Outpost workflow.
var (
	AttrStatus = temporal.NewSearchAttributeKeyKeyword("OutpostStatus")
	AttrKind   = temporal.NewSearchAttributeKeyKeyword("OutpostKind")
	AttrSite   = temporal.NewSearchAttributeKeyKeyword("OutpostSite")
	AttrTarget = temporal.NewSearchAttributeKeyKeyword("OutpostTarget")
	// AttrRegion names the region (contract.Region) whose central workers
	// own the workflow; set at start, only for a site with a region.
	AttrRegion = temporal.NewSearchAttributeKeyKeyword("OutpostRegion")
)

// SearchAttributes lists every search attribute Outpost registers.
var SearchAttributes = []temporal.SearchAttributeKeyKeyword{AttrStatus, AttrKind, AttrSite, AttrTarget, AttrRegion}

// WithRecorded is the failure of a first attempt (RecordAndDeliverInput)
// that recorded the row and then failed to deliver: err with the recorded
// row and policy as its details, which the workflow takes instead of
// recording the row again. Its message, type, retryability and asked delay
// are err's: they make the row's last error and its next status. An
// attempt that returned its context's deadline error keeps the type
// Temporal gives that error (DeadlineExceededType), so it reads as timed
// out whichever way it ends: its own error, or Temporal's timeout.
func WithRecorded(err error, recorded contract.RecordNotificationResult) error {
	msg, errType := err.Error(), ""
	if err == context.DeadlineExceeded {
		errType = DeadlineExceededType
	}
	opts := temporal.ApplicationErrorOptions{Details: []any{recorded}}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		msg, errType = appErr.Message(), appErr.Type()
		opts.NonRetryable, opts.NextRetryDelay, opts.Cause = appErr.NonRetryable(), appErr.NextRetryDelay(), appErr.Unwrap()
	}
	return temporal.NewApplicationErrorWithOptions(msg, errType, opts)
}

// DeadlineExceededType is the type Temporal gives an activity's error when
// the activity returned its context's context.DeadlineExceeded: the Go
// type's name.
const DeadlineExceededType = "deadlineExceededError"

// RecordedBy is the row and policy a failed first attempt carries
// (WithRecorded); false for any other failure, including one whose details
// are something else (a TerminalRow failure's row state).
func RecordedBy(err error) (contract.RecordNotificationResult, bool) {
	var appErr *temporal.ApplicationError
	var recorded contract.RecordNotificationResult
	if !errors.As(err, &appErr) || !appErr.HasDetails() || appErr.Details(&recorded) != nil || recorded.State.NotificationID == "" {
		return contract.RecordNotificationResult{}, false
	}
	return recorded, true
}
