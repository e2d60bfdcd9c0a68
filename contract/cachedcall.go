package contract

import (
	"encoding/json"
	"time"
)

// CachedCallSubmission is what a site hands to central for a cached call whose
// immediate attempt failed transiently: the payload of SignalSubmit on
// workflow CachedCallWorkflowID(OperationID). The call itself (URL, SQL,
// arguments) stays on the site, which delivers it.
type CachedCallSubmission struct {
	OperationID string `json:"operationId"`
	Kind        string `json:"kind"`
	Target      string `json:"target"`
	SiteID      string `json:"siteId"`
	// Policy is the external system's or database connection's retry policy.
	Policy RetryPolicy `json:"policy"`
	// LastAttemptAt is the immediate attempt's time: the first retry waits
	// one interval from it. Nil when the site never finished that attempt.
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	// NextAttemptAt is when the target asked to be tried again, when that is
	// later than one interval (Retry-After); nil otherwise.
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	// Request is what the call sends (system, method and params, or
	// connection, SQL and args) with secret params redacted, at most
	// MaxRequestView bytes: for operators (status query, outpost status),
	// never for delivery, which reads the site's buffer.
	Request   json.RawMessage `json:"request,omitempty"`
	LastError string          `json:"lastError,omitempty"`
	CreatedAt time.Time       `json:"createdAt"`
	// RetryCount and Status are where the site got with the call before
	// central took it over: it retries on its own while central is
	// unreachable, and parks a call whose retries are used up. The workflow
	// continues from there. Empty Status: Pending, retry count 0.
	RetryCount int    `json:"retryCount,omitempty"`
	Status     Status `json:"status,omitempty"`
}

// DeliverCachedCallInput asks the site for one retry of a cached call.
type DeliverCachedCallInput struct {
	OperationID string `json:"operationId"`
	// RetryCount is the number of retries already made; this attempt is
	// retry RetryCount+1. The site records each retry once: a redelivered
	// activity task for a retry already recorded returns the recorded row.
	RetryCount int         `json:"retryCount"`
	Policy     RetryPolicy `json:"policy"`
}

// ResolveParkedCallInput applies an operator's retry or discard to a parked
// cached call on its site.
type ResolveParkedCallInput struct {
	OperationID string         `json:"operationId"`
	Retry       bool           `json:"retry"`
	Action      OperatorAction `json:"action"`
	// Cancelled is a discard a cancel request asked for: it applies to a
	// call in any state that is not final, not only a parked one.
	Cancelled bool `json:"cancelled,omitempty"`
}

// ErrTypeUnknownOperation fails a site activity on a daemon that does not
// hold the operation. It is retryable: another daemon polling the site's
// task queue (a second daemon with the same site id) may have taken the
// task, and the retry reaches the one that holds it. The site reports a
// second poller (outpost_site_other_pollers).
const ErrTypeUnknownOperation = "UnknownOperation"

// CachedCallState is what a cached call's workflow answers (status query
// and result): its tracking row, and the last operator action applied to
// it. The row's fields stay at the top level of the JSON, so a reader of a
// plain TrackedOperation still decodes it.
type CachedCallState struct {
	TrackedOperation
	LastOperatorAction *OperatorAction `json:"lastOperatorAction,omitempty"`
	// Request is the submission's view of what the call sends.
	Request json.RawMessage `json:"request,omitempty"`
}

// MaxRequestView bounds the request a submission carries for operators.
const MaxRequestView = 4 << 10
