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

// Failure is a failed attempt that reached, or tried to reach, the target.
// Permanent failures (HTTP 4xx except 408 and 429, unexpected 1xx and 3xx;
// SQL errors retrying cannot fix) must not be retried; transient ones
// (network errors, timeouts, HTTP 5xx, 408 and 429, a locked, busy, missing
// or unreachable database, deadlocks) are.
type Failure struct {
	// Permanent is true when retrying cannot help.
	Permanent bool
	// Status is the HTTP status from the target; 0 for network and database
	// failures.
	Status int
	// Message is what the target said, e.g. `HTTP 400 Bad Request:
	// {"error":"no such order"}`; never holds the system's secret.
	Message string
	// RetryAfter is how long a 429 or 503 answer asked the caller to wait
	// (its Retry-After header); 0 when it did not say.
	RetryAfter time.Duration
	// Err is the underlying error, if any, returned by Unwrap.
	Err error
}

// Error is the target's message.
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
