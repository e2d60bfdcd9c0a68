// Package targets executes one cached call — an HTTP call to an external
// system or a parameterised database write — and classifies a failure as
// permanent (never retried) or transient (retried by the caller's policy).
package targets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Request is one cached call as the site buffers it (JSON in the buffer's
// payload).
type Request struct {
	// Kind is workflows.KindExternalCall or workflows.KindDatabaseWrite.
	Kind string `json:"kind"`
	// System names the external system (ExternalCall).
	System string `json:"system,omitempty"`
	// Method names the system's method (ExternalCall).
	Method string `json:"method,omitempty"`
	// Params fill the method's path template; the rest go in the body or
	// the query string (ExternalCall).
	Params map[string]any `json:"params,omitempty"`
	// Connection names the database (DatabaseWrite).
	Connection string `json:"connection,omitempty"`
	// SQL is the statement, with placeholders for Args (DatabaseWrite).
	SQL string `json:"sql,omitempty"`
	// Args are bound to SQL's placeholders, never formatted into it
	// (DatabaseWrite).
	Args []any `json:"args,omitempty"`
	// IdempotencyKey is sent with every attempt of an ExternalCall (header
	// idempotency_header, default Idempotency-Key): the operation's id, so a
	// target that processed an attempt whose answer was lost can tell a
	// retry from a new request. Set by the caller for each attempt, not
	// buffered.
	IdempotencyKey string `json:"-"`
}

// Encode is the buffered form of r. It refuses, with an *InvalidError, what
// could not come back unchanged: an argument of an unsupported type (a
// []byte would come back as a base64 string) or a parameter JSON cannot
// hold.
func Encode(r Request) ([]byte, error) {
	if err := checkValues(r); err != nil {
		return nil, err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return b, nil
}

// Decode parses a buffered payload. Numbers come back as int64 when
// integral (json.Number, UseNumber), else float64, so the immediate attempt
// and every retry see identical arguments (callers always Encode then Decode
// before the first attempt).
func Decode(payload []byte) (Request, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("decode request: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Request{}, errors.New("decode request: data after the request")
	}
	for k, v := range r.Params {
		r.Params[k] = fromNumbers(v)
	}
	for i, v := range r.Args {
		r.Args[i] = fromNumbers(v)
	}
	return r, nil
}

// Canonical is req as Decode(Encode(req)) gives it, so an attempt binds
// the same values whether or not its caller went through the buffer.
func Canonical(req Request) (Request, error) {
	b, err := Encode(req)
	if err != nil {
		return Request{}, err
	}
	return Decode(b)
}

// fromNumbers replaces every json.Number in v, however deep, by an int64 or
// a float64.
func fromNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		// Out of range gives ±Inf or 0 with an error; Validate refuses the Inf.
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = fromNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = fromNumbers(e)
		}
	}
	return v
}
