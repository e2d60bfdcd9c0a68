package targets

import (
	"encoding/json"
	"time"
)

// InvalidError is a request that can never run: an unknown system, method
// or connection, a missing path parameter, an unsupported argument type,
// empty SQL. Callers treat it as permanent.
type InvalidError struct {
	// Field names where the request is wrong: "system", "method",
	// "params.id", "connection", "sql", "args[2]".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error is "field: reason".
func (e *InvalidError) Error() string { return e.Field + ": " + e.Reason }

// Failure is a failed attempt that reached, or tried to reach, its
// receiver: a cached call's system or database, or a notification's SMTP
// server, Teams channel or webhook. It is the one error that carries an
// attempt's verdict; each protocol's classifier makes it (HTTP answers by
// internal/httpanswer's rule, database errors in internal/targetexec, SMTP
// replies in notification). Permanent failures (HTTP 4xx except 408 and
// 429, unexpected 1xx and 3xx; SQL errors retrying cannot fix; SMTP 5xx; a
// request that cannot be made) must not be retried; transient ones
// (network errors, timeouts, HTTP 5xx, 408 and 429, a locked, busy, missing
// or unreachable database, deadlocks, SMTP 4xx) are.
type Failure struct {
	// Permanent is true when retrying cannot help.
	Permanent bool
	// Uncertain is true when the receiver may have accepted it all the
	// same: an SMTP server had the whole message and then gave no answer
	// (a timeout or a lost connection while waiting for its final reply).
	Uncertain bool
	// Misconfigured is true when the failure is this worker's own (a
	// notification list's or channel's unset or invalid secret), not the
	// receiver's; always Permanent.
	Misconfigured bool
	// Code is the receiver's answer: the HTTP status or the SMTP reply
	// code; 0 when it never answered, and for database failures.
	Code int
	// Message is what the receiver said, e.g. `HTTP 400 Bad Request:
	// {"error":"no such order"}` or `smtp 550: ...`; never holds a secret.
	// When empty, the failure reads as Err.
	Message string
	// RetryAfter is how long a 429 or 503 answer asked the caller to wait
	// (its Retry-After header); 0 when it did not say.
	RetryAfter time.Duration
	// Err is the underlying error, if any, returned by Unwrap.
	Err error
}

// Error is the receiver's message, else the underlying error's.
func (f *Failure) Error() string {
	if f.Message == "" && f.Err != nil {
		return f.Err.Error()
	}
	return f.Message
}

// Unwrap returns the underlying error.
func (f *Failure) Unwrap() error { return f.Err }

// Transient reports whether a later attempt may succeed.
func (f *Failure) Transient() bool { return !f.Permanent }

// AskedWait is how long the target asked to wait before the next attempt
// (RetryAfter).
func (f *Failure) AskedWait() time.Duration { return f.RetryAfter }

// Result is a successful attempt.
type Result struct {
	// HTTPStatus is the target's 2xx status (ExternalCall).
	HTTPStatus int `json:"httpStatus,omitempty"`
	// Body is the response body when it is JSON, else a JSON string of it;
	// a body over 1 MiB is cut there and kept as a string (ExternalCall).
	Body json.RawMessage `json:"body,omitempty"`
	// RowsAffected is what the write changed (DatabaseWrite).
	RowsAffected int64 `json:"rowsAffected,omitempty"`
}
