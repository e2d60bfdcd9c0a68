// Package site is the Outpost site SDK, what scripts call in process.
//
// A script opens the site's store, calls Notify, and gets the notification id
// back once the notification is on disk; Call and Write make a cached call's
// immediate attempt and queue it for retry when it fails. The site daemon
// (`outpost site`, package internal/sitedaemon), running beside it on the
// same store file, hands the work to central.
//
// Call and Write reach their targets through package site/targetcalls
// (targetcalls.OpenConfig, or Options.Calls = targetcalls.New), which links
// the HTTP client and the SQL drivers: this package links neither, so that
// a script that only notifies links a few packages (TestSDKLinksFewPackages).
package site

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
)

// Limits on a notification, checked before anything is buffered.
const (
	// DefaultMaxBodyBytes is the body limit unless Options.MaxBodyBytes says otherwise.
	DefaultMaxBodyBytes = 64 << 10
	// MaxSubjectChars bounds a subject (an email header line is at most 998 octets).
	MaxSubjectChars = 900
	// MaxListChars bounds a list name.
	MaxListChars = 200
	// MaxProvenanceChars bounds an instance or script name (central's
	// columns hold 256 characters).
	MaxProvenanceChars = 256
)

// checkProvenance bounds the instance and script names of an operation.
func checkProvenance(instance, script string) error {
	for _, f := range []struct{ name, value string }{{"instance", instance}, {"script", script}} {
		switch {
		case utf8.RuneCountInString(f.value) > MaxProvenanceChars:
			return &InvalidError{f.name, fmt.Sprintf("longer than %d characters", MaxProvenanceChars)}
		case !utf8.ValidString(f.value):
			return &InvalidError{f.name, "must be valid UTF-8"}
		}
	}
	return nil
}

// checkIdentity refuses a site id or node central could not store: every
// operation would be accepted and then fail to reach central forever.
func checkIdentity(opts Options) error {
	if strings.TrimSpace(opts.SiteID) == "" {
		return &InvalidError{"SiteID", "is required: it names the site in every operation's provenance (use the daemon's site.id)"}
	}
	if !contract.IsSiteName(opts.SiteID) {
		return &InvalidError{"SiteID", fmt.Sprintf("%q must be 1-64 letters, digits, '.', '_' or '-', like the daemon's site.id", opts.SiteID)}
	}
	if opts.Node != "" && !contract.IsSiteName(opts.Node) {
		return &InvalidError{"Node", fmt.Sprintf("%q must be 1-64 letters, digits, '.', '_' or '-', like the daemon's site.node", opts.Node)}
	}
	return nil
}

// ErrNotFound is returned by Status for an id neither the site nor central knows.
var ErrNotFound = errors.New("operation not found")

// UnavailableError refuses a new operation this client cannot take now:
// nothing was buffered. Holder names the site daemon that takes the site's
// work meanwhile; Reason says what to do.
type UnavailableError struct {
	Holder string
	Reason string
}

func (e *UnavailableError) Error() string { return e.Reason }

// InvalidError is bad input from a caller: nothing was buffered.
type InvalidError struct {
	Field  string
	Reason string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

// Options configures a Client.
type Options struct {
	// SiteID and Node are the provenance stamped on every operation.
	SiteID string
	Node   string
	// Instance and Script are the default provenance of this client's calls.
	Instance string
	Script   string
	// Central answers Status for operations already handed to central
	// (temporalcentral.New asks it through a Temporal client). May be nil:
	// Status then answers only for buffered operations.
	Central Central
	// MaxBodyBytes limits a notification body; DefaultMaxBodyBytes when 0.
	MaxBodyBytes int
	// CommitBatch and CommitDelay tune the store's group commit
	// (site.commit_batch and site.commit_delay in the file): 256 operations
	// and 2ms when 0.
	CommitBatch int
	CommitDelay time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// ExternalSystems and Databases are what Call and Write reach, for a
	// client opened with Open; targetcalls.OpenConfig takes them from the
	// file. Start each from DefaultExternalSystem or DefaultDatabase: they
	// are checked by the rules of `outpost config check`.
	ExternalSystems map[string]ExternalSystem
	Databases       map[string]Database
	// Calls makes Open's executor of Call and Write at those targets: set
	// it to targetcalls.New (package site/targetcalls), which links net/http
	// and the SQL drivers that this package leaves out. Without it, Open
	// refuses targets, and Call and Write fail saying what to set. (New
	// takes its executor as an argument instead.)
	Calls func(*targets.Registry) Executor
	// OnEnqueue, when set, is told after every operation the client
	// buffers, so an in-process forwarder (the site daemon's) hands it off
	// at once instead of at its next poll.
	OnEnqueue func()
	// Admit, when set, is asked before the client takes a new operation;
	// its error (an *UnavailableError) refuses the operation and nothing is
	// buffered. The site daemon's client refuses while another daemon holds
	// the site.
	Admit func() error
}

// Executor makes one attempt at a cached call or write to the targets it
// was made for; targetcalls.New makes the one scripts use.
type Executor interface {
	Execute(ctx context.Context, req targets.Request) (targets.Result, error)
	// Close closes its connections; later attempts fail.
	Close() error
}

// Client is the site SDK.
type Client struct {
	store *sitestore.Store
	opts  Options
	// targets holds the definitions of the external systems and databases
	// and calls makes the attempts at them; both nil for a client that only
	// notifies.
	targets *targets.Registry
	calls   Executor
	// unknown holds ids central recently said it never had.
	unknown *unknownIDs
}

// The definitions of the targets a client calls and writes to.
type (
	// ExternalSystem is an HTTP system scripts call: base URL, methods,
	// timeout, auth and retry policy (site.external_systems in the file).
	ExternalSystem = targets.ExternalSystem
	// Method is one of an external system's methods: verb and path.
	Method = targets.Method
	// Database is a database scripts write to: driver, DSN, timeout,
	// allowed statement classes and retry policy (site.databases).
	Database = targets.Database
)

// DefaultExternalSystem is an external system with the file's defaults
// (30 s timeout, Idempotency-Key header, 10 retries a minute apart); set
// BaseURL and Methods.
func DefaultExternalSystem() ExternalSystem { return targets.DefaultExternalSystem() }

// DefaultDatabase is a SQLite database with the file's defaults; set DSN.
func DefaultDatabase() Database { return targets.DefaultDatabase() }

// Open opens the site store at path for a script: notifications, and
// calls and writes to the targets in opts, made by opts.Calls
// (targetcalls.OpenConfig reads the targets from the site's config file
// instead).
func Open(ctx context.Context, path string, opts Options) (*Client, error) {
	if err := checkIdentity(opts); err != nil {
		return nil, err
	}
	if err := checkTargets(opts); err != nil {
		return nil, err
	}
	store, err := sitestore.Open(ctx, path, sitestore.Options{Now: opts.Now, CommitBatch: opts.CommitBatch, CommitDelay: opts.CommitDelay})
	if err != nil {
		return nil, err
	}
	if opts.Calls == nil {
		return New(store, nil, nil, opts), nil
	}
	reg := targets.New(opts.ExternalSystems, opts.Databases)
	return New(store, reg, opts.Calls(reg), opts), nil
}

// checkTargets refuses targets no rule of the file would take, and targets
// the client could not call.
func checkTargets(opts Options) error {
	if len(opts.ExternalSystems)+len(opts.Databases) == 0 {
		return nil
	}
	if err := targets.Check(opts.ExternalSystems, opts.Databases); err != nil {
		return fmt.Errorf("site options: %w", err)
	}
	if opts.Calls == nil {
		return &InvalidError{"Calls", "is required with ExternalSystems or Databases: set it to targetcalls.New " +
			"(import github.com/outpost-dev/outpost/site/targetcalls), which makes the calls and writes"}
	}
	return nil
}

// New is a client of an open store, the site's target definitions and the
// executor of their calls and writes (both nil for notifications only).
// The site daemon uses it to share them with its forwarder and its
// activities; scripts use Open or targetcalls.OpenConfig.
func New(store *sitestore.Store, reg *targets.Registry, calls Executor, opts Options) *Client {
	if opts.OnEnqueue == nil {
		opts.OnEnqueue = func() {}
	}
	if opts.Admit == nil {
		opts.Admit = func() error { return nil }
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	// No accepted notification may be one central would refuse forever.
	opts.MaxBodyBytes = min(opts.MaxBodyBytes, contract.MaxBodyBytesLimit)
	c := &Client{store: store, targets: reg, calls: calls, opts: opts}
	c.unknown = newUnknownIDs(c.now)
	return c
}

// MaxBodyBytes is the longest notification body the client accepts.
func (c *Client) MaxBodyBytes() int { return c.opts.MaxBodyBytes }

// Close closes the store and the database connections of cached writes.
func (c *Client) Close() error {
	var err error
	if c.calls != nil {
		err = c.calls.Close()
	}
	return errors.Join(err, c.store.Close())
}

// Notification is a notification with per-call provenance.
type Notification struct {
	List     string `json:"list"`
	Subject  string `json:"subject"`
	Body     string `json:"body"`
	Instance string `json:"instance,omitempty"`
	Script   string `json:"script,omitempty"`
	// IdempotencyKey, when set, names the request: sent again with the
	// same key and content it returns the same id and buffers nothing
	// more; with other content it fails with ErrIdempotencyConflict.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// SubmittedBy names who submitted the request, recorded as the
	// operator of its Enqueued audit event at central. The site API sets it
	// to the holder of the request's token; never read from a body.
	SubmittedBy string `json:"-"`
	// TraceParent is the W3C traceparent of the trace the notification
	// belongs to: its hand-off, workflow and delivery attempts join that
	// trace when the site daemon traces (telemetry.otlp_endpoint). The site
	// API sets it from its request's span; not part of the request an
	// idempotency key names.
	TraceParent string `json:"-"`
}

// Notify buffers a notification to list and returns its id once it is on
// disk. Central delivers it later, whatever the state of the WAN.
func (c *Client) Notify(ctx context.Context, list, subject, body string) (string, error) {
	return c.Send(ctx, Notification{List: list, Subject: subject, Body: body, Instance: c.opts.Instance, Script: c.opts.Script})
}

// NewID is a new NotificationId or TrackedOperationId: a version 7 UUID.
// Its time order keeps the buffer's primary-key index growing at its end
// instead of at random pages: fewer pages written per commit in a burst.
func NewID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new operation id: %w", err)
	}
	return id.String(), nil
}

// Send is Notify with explicit provenance.
func (c *Client) Send(ctx context.Context, n Notification) (string, error) {
	if err := c.opts.Admit(); err != nil {
		return "", err
	}
	if err := c.validate(n); err != nil {
		return "", err
	}
	id, err := c.operationID(contract.KindNotification, n.IdempotencyKey)
	if err != nil {
		return "", err
	}
	hash, err := requestHash(n.IdempotencyKey, n)
	if err != nil {
		return "", err
	}
	now := c.now()
	sub := contract.NotificationSubmission{
		NotificationID: id, ListName: n.List, Subject: n.Subject, Body: n.Body,
		SourceSiteID: c.opts.SiteID, SourceNode: c.opts.Node, SourceInstanceID: n.Instance,
		SourceScript: n.Script, SubmittedBy: n.SubmittedBy, SiteEnqueuedAt: now,
	}
	payload, err := json.Marshal(sub)
	if err != nil {
		return "", fmt.Errorf("encode notification: %w", err)
	}
	stored, err := c.store.Enqueue(ctx, sitestore.NewMessage{
		ID: id, Category: contract.KindNotification, Target: n.List, Payload: payload, RequestHash: hash, TraceParent: n.TraceParent,
		Provenance: sitestore.Provenance{SiteID: c.opts.SiteID, Node: c.opts.Node, Instance: n.Instance, Script: n.Script},
	})
	if err != nil {
		return "", fmt.Errorf("notify %s: %w", n.List, conflictError(err, n.IdempotencyKey))
	}
	if !stored[0].Replayed {
		c.opts.OnEnqueue()
	}
	return id, nil
}

func (c *Client) validate(n Notification) error {
	switch {
	case strings.TrimSpace(n.List) == "":
		return &InvalidError{"list", "required: the name of a notification list defined at central"}
	case utf8.RuneCountInString(n.List) > MaxListChars:
		return &InvalidError{"list", fmt.Sprintf("longer than %d characters", MaxListChars)}
	case !utf8.ValidString(n.List):
		return &InvalidError{"list", "must be valid UTF-8"}
	case strings.TrimSpace(n.Subject) == "":
		return &InvalidError{"subject", "required"}
	case utf8.RuneCountInString(n.Subject) > MaxSubjectChars:
		return &InvalidError{"subject", fmt.Sprintf("longer than %d characters", MaxSubjectChars)}
	case strings.ContainsAny(n.Subject, "\r\n"):
		return &InvalidError{"subject", "must be one line"}
	case strings.ContainsRune(n.Subject, 0):
		// A mail header cannot carry it; relays refuse or cut the line.
		return &InvalidError{"subject", "must not contain a NUL character"}
	case len(n.Body) > c.opts.MaxBodyBytes:
		return &InvalidError{"body", fmt.Sprintf("%d bytes is over the limit of %d bytes (site.max_body_bytes)", len(n.Body), c.opts.MaxBodyBytes)}
	case !utf8.ValidString(n.Subject):
		return &InvalidError{"subject", "must be valid UTF-8"}
	case !utf8.ValidString(n.Body):
		return &InvalidError{"body", "must be valid UTF-8"}
	}
	if err := checkIdempotencyKey(n.IdempotencyKey); err != nil {
		return err
	}
	return checkProvenance(n.Instance, n.Script)
}

// Status answers where a notification is: Forwarding while the site still
// holds it, otherwise central's answer (status, retry count, last error,
// timestamps).
func (c *Client) Status(ctx context.Context, id string) (contract.NotificationState, error) {
	if !contract.IsOperationID(id) {
		return contract.NotificationState{}, &InvalidError{"id", fmt.Sprintf("%q is not a notification id (a lower-case UUID like 343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11)", id)}
	}
	exported, err := c.store.JobExportState(ctx, id)
	if err != nil && !errors.Is(err, sitestore.ErrNotFound) {
		return contract.NotificationState{}, err
	}
	msg, err := c.store.Get(ctx, id)
	if err == nil {
		return forwardingState(msg, exported), nil
	}
	if !errors.Is(err, sitestore.ErrNotFound) {
		return contract.NotificationState{}, err
	}
	if c.unknown.has(id) {
		return contract.NotificationState{}, fmt.Errorf("notification %s: %w", id, ErrNotFound)
	}
	if c.opts.Central == nil {
		if exported.CentralStatus != "" {
			return receiptState(id, exported), nil
		}
		return contract.NotificationState{}, fmt.Errorf("notification %s has left the site and no central is configured to ask (Options.Central)", id)
	}
	state, err := c.opts.Central.NotificationState(ctx, id)
	var unreachable *UnreachableError
	switch {
	case errors.As(err, &unreachable) && exported.CentralStatus != "":
		return receiptState(id, exported), nil
	case errors.Is(err, ErrNotFound):
		c.unknown.add(id)
	}
	return state, err
}

// receiptState answers for a notification an air-gap receipt settled
// while central cannot be asked: the state the newest receipt carried.
func receiptState(id string, st sitestore.ExportState) contract.NotificationState {
	return contract.NotificationState{NotificationID: id, Status: st.CentralStatus, RetryCount: st.CentralRetryCount,
		LastAttemptAt: st.CentralLastAttemptAt, DeliveredAt: st.CentralDeliveredAt}
}

func forwardingState(m sitestore.Message, exported sitestore.ExportState) contract.NotificationState {
	st := contract.NotificationState{
		NotificationID: m.ID, Status: contract.StatusForwarding, RetryCount: m.RetryCount,
		LastError: m.LastError, SiteEnqueuedAt: m.CreatedAt, LastAttemptAt: m.LastAttemptAt,
		NextAttemptAt: &m.NextAttemptAt,
	}
	switch {
	case m.Status == contract.StatusParked:
		// Central refused it for good: it waits on the site, not retried.
		st.Status, st.NextAttemptAt = contract.StatusParked, nil
	case exported.ExportedAt != nil:
		// On a bundle on its way to central; the forwarder still sends it
		// if the link returns first (central takes it once either way).
		st.Status = contract.StatusExported
	}
	return st
}

// Central answers for a notification that has left the site: its state,
// an error wrapping ErrNotFound when central never had it, or an
// *UnreachableError when central could not be asked. The SDK declares it
// so that a script links no Temporal client unless it asks central.
type Central interface {
	NotificationState(ctx context.Context, id string) (contract.NotificationState, error)
}

// UnreachableError says central could not be asked.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return "central is unreachable: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

func (c *Client) now() time.Time {
	if c.opts.Now == nil {
		return time.Now().UTC()
	}
	return c.opts.Now().UTC()
}

// BufferDepth is how many operations the site still holds.
func (c *Client) BufferDepth(ctx context.Context) (int, error) { return c.store.Depth(ctx) }
