package contract

import "time"

// NotificationSubmission is what a site hands to central for one notification:
// the payload of SignalSubmit on workflow NotificationWorkflowID(NotificationID).
type NotificationSubmission struct {
	NotificationID   string `json:"notificationId"`
	ListName         string `json:"listName"`
	Subject          string `json:"subject"`
	Body             string `json:"body"`
	SourceSiteID     string `json:"sourceSiteId"`
	SourceNode       string `json:"sourceNode,omitempty"`
	SourceInstanceID string `json:"sourceInstanceId,omitempty"`
	SourceScript     string `json:"sourceScript,omitempty"`
	// SubmittedBy is who submitted it: the holder of the site API token it
	// came with (site.api_tokens); empty without one.
	SubmittedBy    string    `json:"submittedBy,omitempty"`
	SiteEnqueuedAt time.Time `json:"siteEnqueuedAt"`
}

// NotificationState is the central view of one notification: the status
// query's answer and the workflow's result.
type NotificationState struct {
	NotificationID  string    `json:"notificationId"`
	Status          Status    `json:"status"`
	RetryCount      int       `json:"retryCount"`
	LastError       string    `json:"lastError,omitempty"`
	ResolvedTargets []string  `json:"resolvedTargets,omitempty"`
	SiteEnqueuedAt  time.Time `json:"siteEnqueuedAt,omitzero"`
	// CreatedAt is when central recorded it; zero (left out) while the
	// site still holds it.
	CreatedAt     time.Time  `json:"createdAt,omitzero"`
	LastAttemptAt *time.Time `json:"lastAttemptAt,omitempty"`
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	DeliveredAt   *time.Time `json:"deliveredAt,omitempty"`
	// LastOperatorAction is the most recent retry or discard applied.
	LastOperatorAction *OperatorAction `json:"lastOperatorAction,omitempty"`
}

// RetryPolicy is a fixed-interval delivery policy: MaxRetries retries after the
// first attempt, Interval apart, then the operation parks.
type RetryPolicy struct {
	Interval   time.Duration `json:"interval"`
	MaxRetries int           `json:"maxRetries"`
	// AttemptTimeout bounds one delivery attempt.
	AttemptTimeout time.Duration `json:"attemptTimeout"`
	// HeartbeatTimeout is how long an attempt may go without a heartbeat
	// before Temporal takes its worker for gone and retries it; set by a
	// daemon whose attempts heartbeat. Zero (a site of an earlier version,
	// whose attempts do not heartbeat): only AttemptTimeout ends a lost
	// attempt.
	HeartbeatTimeout time.Duration `json:"heartbeatTimeout,omitempty"`
}

// RecordNotificationResult is the central row as stored (possibly by an
// earlier run) and the retry policy in force for its delivery.
type RecordNotificationResult struct {
	State  NotificationState `json:"state"`
	Policy RetryPolicy       `json:"policy"`
}

// RecordAndDeliverInput asks for a notification's first delivery attempt,
// which records its central row first.
type RecordAndDeliverInput struct {
	Submission NotificationSubmission `json:"submission"`
	// Attempt numbers the attempt (DeliverNotificationInput.Attempt).
	Attempt int `json:"attempt"`
}

// RecordAndDeliverResult is the central row as recorded and the delivery.
type RecordAndDeliverResult struct {
	Recorded RecordNotificationResult `json:"recorded"`
	// Delivery is nil when no attempt was made: the row was not Pending.
	Delivery *DeliverNotificationResult `json:"delivery,omitempty"`
}

// DeliverNotificationInput asks for one delivery attempt.
type DeliverNotificationInput struct {
	NotificationID string `json:"notificationId"`
	// RetryCount is the number of failed attempts before this one in the current cycle.
	RetryCount int `json:"retryCount"`
	// Attempt numbers this attempt among all of the run's attempts, from 1
	// (operator retries do not reset it): it names the attempt's audit event.
	Attempt int `json:"attempt,omitempty"`
}

// DeliverNotificationResult is a successful delivery.
type DeliverNotificationResult struct {
	DeliveredAt     time.Time `json:"deliveredAt"`
	ResolvedTargets []string  `json:"resolvedTargets"`
	// Unrecorded is true when the email went out but the activity could not
	// mark the central row Delivered: the workflow records it instead, for
	// a failed activity would make the workflow send the email again.
	Unrecorded bool `json:"unrecorded,omitempty"`
}

// NotificationUpdate is a status change written to the central row.
type NotificationUpdate struct {
	NotificationID string     `json:"notificationId"`
	Status         Status     `json:"status"`
	RetryCount     int        `json:"retryCount"`
	LastError      string     `json:"lastError,omitempty"`
	LastAttemptAt  *time.Time `json:"lastAttemptAt,omitempty"`
	NextAttemptAt  *time.Time `json:"nextAttemptAt,omitempty"`
	// DeliveredAt and ResolvedTargets go with Status Delivered (required
	// then): a delivery whose activity could not record it.
	DeliveredAt     time.Time `json:"deliveredAt,omitzero"`
	ResolvedTargets []string  `json:"resolvedTargets,omitempty"`

	// The fields below feed the audit log; all are optional.

	// SiteID is the notification's source site.
	SiteID string `json:"siteId,omitempty"`
	// At is when the workflow decided the change (workflow time); a
	// Discarded row's terminal time.
	At time.Time `json:"at,omitzero"`
	// Attempt is the delivery attempt (DeliverNotificationInput.Attempt)
	// whose outcome this change records: a failure, or a delivery the
	// attempt could not record; 0 when it records none.
	Attempt int `json:"attempt,omitempty"`
	// OperatorAction is the operator's retry or discard this change applies.
	OperatorAction *OperatorAction `json:"operatorAction,omitempty"`
	// OperatorSeq numbers the run's operator actions from 1.
	OperatorSeq int `json:"operatorSeq,omitempty"`
}

// Error types that make a delivery failure permanent (no retry: park at once).
const (
	ErrTypeUnknownList  = "UnknownList"
	ErrTypeNoRecipients = "NoRecipients"
	ErrTypeRejected     = "SMTPRejected"
	// ErrTypeRefused is a Teams or webhook receiver's permanent refusal
	// (a 4xx other than 408 and 429).
	ErrTypeRefused = "DeliveryRefused"
	// ErrTypeMisconfigured is a list whose channel is missing, whose env:
	// target is unset, or whose webhook secret is unset or not valid: an
	// operator must fix the list or the worker.
	ErrTypeMisconfigured = "ListMisconfigured"
	// ErrTypeUncertain is a send the server may have accepted: it had the
	// whole message and never answered. Sending again could deliver it
	// twice, so it parks for an operator to check and retry or discard.
	ErrTypeUncertain = "DeliveryUncertain"
)

// ErrTypeDeliveryFailed is a transient Teams or webhook failure whose
// receiver asked to wait (Retry-After): the error's NextRetryDelay.
const ErrTypeDeliveryFailed = "DeliveryFailed"

// ErrTypeTerminalRow fails a central-store write that would change a row
// already Delivered or Discarded: no retry can make it. Its details are the
// row's NotificationState, which the workflow adopts.
const ErrTypeTerminalRow = "TerminalRow"

// ErrTypeRowUnrecorded fails a first attempt (RecordAndDeliverInput) that
// could not record the central row: nothing was attempted, and the
// workflow records the row itself, waiting out the store's outage.
const ErrTypeRowUnrecorded = "RowUnrecorded"

// Notification types: a list's type picks the adapter that delivers to it.
const (
	NotificationTypeEmail   = "Email"   // SMTP to addresses
	NotificationTypeTeams   = "Teams"   // an Adaptive Card to Microsoft Teams webhook URLs
	NotificationTypeWebhook = "Webhook" // a signed JSON POST to any URL
)

// NotificationTypes lists every notification type. Each call returns a new
// slice.
func NotificationTypes() []string {
	return []string{NotificationTypeEmail, NotificationTypeTeams, NotificationTypeWebhook}
}
