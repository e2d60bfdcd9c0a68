package site

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/callstate"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
)

// CallRequest is an external system call with per-call provenance.
type CallRequest struct {
	System   string         `json:"system"`
	Method   string         `json:"method"`
	Params   map[string]any `json:"params,omitempty"`
	Instance string         `json:"instance,omitempty"`
	Script   string         `json:"script,omitempty"`
	// IdempotencyKey: see Notification.IdempotencyKey. A call sent again
	// with its key is not attempted again: the answer is its state now.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// SubmittedBy: see Notification.SubmittedBy.
	SubmittedBy string `json:"-"`
	// TraceParent: see Notification.TraceParent.
	TraceParent string `json:"-"`
}

// WriteRequest is a parameterised database write with per-call provenance:
// the SQL text and its arguments travel separately, always.
type WriteRequest struct {
	Connection string `json:"connection"`
	SQL        string `json:"sql"`
	Args       []any  `json:"args,omitempty"`
	Instance   string `json:"instance,omitempty"`
	Script     string `json:"script,omitempty"`
	// IdempotencyKey: see CallRequest.IdempotencyKey.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// SubmittedBy: see Notification.SubmittedBy.
	SubmittedBy string `json:"-"`
	// TraceParent: see Notification.TraceParent.
	TraceParent string `json:"-"`
}

// CallResult is the answer to a cached call or write.
type CallResult struct {
	// ID is the TrackedOperationId: Tracking().Status(ID) follows it.
	ID string `json:"id"`
	// Status is Delivered (done), Pending (queued: the site retries it
	// through central) or Failed (the target refused it for good).
	Status contract.Status `json:"status"`
	// HTTPStatus and Body are the external system's answer (Delivered calls).
	HTTPStatus int             `json:"httpStatus,omitempty"`
	Body       json.RawMessage `json:"body,omitempty"`
	// RowsAffected is the database's answer (Delivered writes; 0 is an
	// answer too, so it is nil only for calls and undelivered writes).
	RowsAffected *int64 `json:"rowsAffected,omitempty"`
	// Error is what the target said when the immediate attempt failed.
	Error string `json:"error,omitempty"`
}

// Queued reports whether the call was buffered for retry.
func (r CallResult) Queued() bool { return r.Status == contract.StatusPending }

// TargetError is a permanent failure of a cached call: the target refused it
// and retrying cannot help. The call's tracking row is Failed.
type TargetError struct {
	ID string
	// Status is the target's HTTP status; 0 for a database.
	Status  int
	Message string
}

func (e *TargetError) Error() string {
	return fmt.Sprintf("operation %s failed: %s", e.ID, e.Message)
}

// Call calls method of external system (both defined in the site config)
// with params. The site makes one attempt at once: Delivered returns the
// answer; a transient failure (timeout, connection refused, HTTP 5xx, 408,
// 429) queues the call for retry and returns it Pending with no error; a
// permanent failure (other HTTP 4xx) returns a *TargetError.
func (c *Client) Call(ctx context.Context, system, method string, params map[string]any) (CallResult, error) {
	return c.SendCall(ctx, CallRequest{System: system, Method: method, Params: params, Instance: c.opts.Instance, Script: c.opts.Script})
}

// SendCall is Call with explicit provenance.
func (c *Client) SendCall(ctx context.Context, r CallRequest) (CallResult, error) {
	return c.cachedCall(ctx, r.target(), provenance{r.Instance, r.Script, r.IdempotencyKey, r.SubmittedBy, r.TraceParent})
}

// Attempt makes a tracked call's immediate attempt and records its outcome:
// the answers of Call and Write.
type Attempt func(context.Context) (CallResult, error)

// BeginCall tracks a call without attempting it yet and returns its id and
// its immediate attempt, for a caller that must know the id before the
// attempt runs (the site API's "Prefer: respond-async"). Run the attempt
// once; a call whose attempt never runs is retried like one whose attempt
// was lost.
func (c *Client) BeginCall(ctx context.Context, r CallRequest) (string, Attempt, error) {
	return c.beginCachedCall(ctx, r.target(), provenance{r.Instance, r.Script, r.IdempotencyKey, r.SubmittedBy, r.TraceParent})
}

// BeginWrite is BeginCall for a write.
func (c *Client) BeginWrite(ctx context.Context, w WriteRequest) (string, Attempt, error) {
	return c.beginCachedCall(ctx, w.target(), provenance{w.Instance, w.Script, w.IdempotencyKey, w.SubmittedBy, w.TraceParent})
}

func (r CallRequest) target() targets.Request {
	return targets.Request{Kind: contract.KindExternalCall, System: r.System, Method: r.Method, Params: r.Params}
}

// Write runs a parameterised SQL statement on a database connection defined
// in the site config, with Call's immediate attempt and queueing. Arguments
// are strings, numbers, booleans, nil or time.Time, bound by position:
// placeholders are ?, ?NNN or $NNN for SQLite, @pNNN for SQL Server (a
// placeholder the driver binds by name, like :name, is an *InvalidError).
func (c *Client) Write(ctx context.Context, connection, sql string, args ...any) (CallResult, error) {
	return c.SendWrite(ctx, WriteRequest{Connection: connection, SQL: sql, Args: args, Instance: c.opts.Instance, Script: c.opts.Script})
}

// SendWrite is Write with explicit provenance.
func (c *Client) SendWrite(ctx context.Context, w WriteRequest) (CallResult, error) {
	return c.cachedCall(ctx, w.target(), provenance{w.Instance, w.Script, w.IdempotencyKey, w.SubmittedBy, w.TraceParent})
}

func (w WriteRequest) target() targets.Request {
	return targets.Request{Kind: contract.KindDatabaseWrite, Connection: w.Connection, SQL: w.SQL, Args: w.Args}
}

// cachedCall tracks req, makes its immediate attempt and records the outcome.
func (c *Client) cachedCall(ctx context.Context, req targets.Request, p provenance) (CallResult, error) {
	_, attempt, err := c.beginCachedCall(ctx, req, p)
	if err != nil {
		return CallResult{}, err
	}
	return attempt(ctx)
}

// beginCachedCall validates and tracks req (tracking and buffer rows in one
// commit: from here on the call is never lost) and returns its immediate
// attempt, which records the outcome, with the operation's id.
func (c *Client) beginCachedCall(ctx context.Context, req targets.Request, p provenance) (string, Attempt, error) {
	if err := c.opts.Admit(); err != nil {
		return "", nil, err
	}
	if err := checkProvenance(p.instance, p.script); err != nil {
		return "", nil, err
	}
	if err := checkIdempotencyKey(p.key); err != nil {
		return "", nil, err
	}
	req, payload, err := c.prepare(req)
	if err != nil {
		return "", nil, err
	}
	id, err := c.operationID(req.Kind, p.key)
	if err != nil {
		return "", nil, err
	}
	hash, err := requestHash(p.key, []any{payload, p.instance, p.script})
	if err != nil {
		return "", nil, err
	}
	row, err := c.store.BeginOperation(ctx, sitestore.NewOperation{
		OperationID: id, Kind: req.Kind, Target: c.targets.Target(req), Payload: payload, RequestHash: hash,
		Provenance:  sitestore.Provenance{SiteID: c.opts.SiteID, Node: c.opts.Node, Instance: p.instance, Script: p.script},
		SubmittedBy: p.submittedBy, AttemptGrace: c.targets.Policy(req).AttemptTimeout, TraceParent: p.traceParent,
	})
	if errors.Is(err, sitestore.ErrReplayed) {
		return id, func(context.Context) (CallResult, error) { return replayedResult(row), nil }, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("track %s: %w", c.targets.Target(req), conflictError(err, p.key))
	}
	req.IdempotencyKey = id
	return id, func(ctx context.Context) (CallResult, error) { return c.immediateAttempt(ctx, id, req) }, nil
}

// immediateAttempt makes the site's one immediate attempt at a tracked call
// and records its outcome.
func (c *Client) immediateAttempt(ctx context.Context, id string, req targets.Request) (CallResult, error) {
	res, attemptErr := c.calls.Execute(ctx, req)
	at := c.now()
	status, lastError := callstate.ImmediateOutcome(attemptErr)
	attempt := sitestore.Attempt{OperationID: id, Status: status, LastError: lastError, At: &at, Immediate: true}
	if status == contract.StatusPending {
		next := callstate.NextAttemptAt(at, c.targets.Policy(req).Interval, attemptErr)
		attempt.NextAttemptAt = &next
	}
	// The caller may have given up; the outcome must be recorded regardless.
	row, err := c.store.RecordAttempt(context.WithoutCancel(ctx), attempt)
	if errors.Is(err, sitestore.ErrSuperseded) {
		// Central took the call over while this attempt ran long: its
		// record stands, and the caller follows it by id.
		return CallResult{ID: id, Status: row.Status, Error: row.LastError}, nil
	}
	if err != nil {
		return CallResult{ID: id, Status: contract.StatusPending}, fmt.Errorf(
			"operation %s: recording the immediate attempt failed; the call stays buffered and central will retry it: %w", id, err)
	}
	if status == contract.StatusPending {
		c.opts.OnEnqueue()
	}
	return callResult(id, req.Kind, status, lastError, res, attemptErr)
}

// provenance is who made a call, and the idempotency key naming it.
type provenance struct{ instance, script, key, submittedBy, traceParent string }

// replayedResult answers a request its idempotency key already made: the
// operation's state now, without another attempt. A call still under way
// reads as Pending (queued), as its first answer did.
func replayedResult(row contract.TrackedOperation) CallResult {
	status := row.Status
	if !status.Terminal() {
		status = contract.StatusPending
	}
	return CallResult{ID: row.OperationID, Status: status, Error: row.LastError}
}

// prepare validates req and returns it as every attempt will see it: decoded
// from its buffered payload.
func (c *Client) prepare(req targets.Request) (targets.Request, []byte, error) {
	if c.calls == nil {
		return req, nil, errors.New("this client makes no calls or writes: open it with targetcalls.OpenConfig, or give site.Open " +
			"Options.ExternalSystems or Databases and Options.Calls = targetcalls.New (import github.com/outpost-dev/outpost/site/targetcalls)")
	}
	if err := c.targets.Validate(req); err != nil {
		return req, nil, asInvalid(err)
	}
	payload, err := targets.Encode(req)
	if err != nil {
		return req, nil, &InvalidError{"params", err.Error()}
	}
	req, err = targets.Decode(payload)
	return req, payload, err
}

func asInvalid(err error) error {
	var invalid *targets.InvalidError
	if errors.As(err, &invalid) {
		return &InvalidError{Field: invalid.Field, Reason: invalid.Reason}
	}
	return err
}

func callResult(id, kind string, status contract.Status, lastError string, res targets.Result, attemptErr error) (CallResult, error) {
	out := CallResult{ID: id, Status: status, HTTPStatus: res.HTTPStatus, Body: res.Body, Error: lastError}
	if kind == contract.KindDatabaseWrite && status == contract.StatusDelivered {
		out.RowsAffected = &res.RowsAffected
	}
	if status != contract.StatusFailed {
		return out, nil
	}
	te := &TargetError{ID: id, Message: lastError}
	var failure *targets.Failure
	if errors.As(attemptErr, &failure) {
		te.Status, out.HTTPStatus = failure.Code, failure.Code
	}
	return out, te
}

// Tracking answers the status of cached calls from the site's tracking
// table, the authoritative record: it works with central unreachable.
type Tracking struct{ store *sitestore.Store }

// Tracking returns the client's tracking table.
func (c *Client) Tracking() Tracking { return Tracking{store: c.store} }

// Status returns the tracking row of a cached call or write.
func (t Tracking) Status(ctx context.Context, id string) (contract.TrackedOperation, error) {
	if err := checkOperationID(id); err != nil {
		return contract.TrackedOperation{}, err
	}
	row, err := t.store.GetOperation(ctx, id)
	return row, operationError(id, err)
}

// checkOperationID refuses an id that is not an operation's.
func checkOperationID(id string) error {
	if !contract.IsOperationID(id) {
		return &InvalidError{"id", fmt.Sprintf("%q is not an operation id (a lower-case UUID like 343ebf6c-0e5d-4c4e-9a4e-2b0d7f1f2a11)", id)}
	}
	return nil
}

// operationError says where an operation the site does not hold may be.
func operationError(id string, err error) error {
	if errors.Is(err, sitestore.ErrNotFound) {
		return fmt.Errorf("operation %s (purged after the retention window if it ended long ago; notifications are at /v1/notifications): %w", id, ErrNotFound)
	}
	return err
}

// List returns every tracking row the site holds, by id.
func (t Tracking) List(ctx context.Context) ([]contract.TrackedOperation, error) {
	return t.store.ListOperations(ctx)
}
