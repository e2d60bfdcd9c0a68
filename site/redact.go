package site

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/sitestore"
	"github.com/outpost-dev/outpost/internal/targets"
)

// DefaultRedactFields are the parameter names whose values the status API
// never shows (site.redact_fields adds more), matched without regard to
// case, at any depth of params.
var DefaultRedactFields = []string{"password", "secret", "token", "apikey", "api_key", "authorization"}

// redacted stands for a value the status API does not show.
const redacted = "[redacted]"

// OperationDetails is a cached call's tracking row and, while the site still
// holds it (until it is delivered or discarded), what it sends: the system,
// method and params, or the connection, SQL and args. Secret params are
// redacted.
type OperationDetails struct {
	contract.TrackedOperation
	Request *targets.Request `json:"request,omitempty"`
}

// Details returns an operation's tracking row and its buffered request,
// with the params named in DefaultRedactFields or redact hidden.
func (t Tracking) Details(ctx context.Context, id string, redact []string) (OperationDetails, error) {
	row, err := t.Status(ctx, id)
	if err != nil {
		return OperationDetails{TrackedOperation: row}, err
	}
	out := OperationDetails{TrackedOperation: row}
	payload, err := t.store.OperationPayload(ctx, id)
	if errors.Is(err, sitestore.ErrNotFound) {
		return out, nil // delivered or discarded: the payload is gone
	}
	if err != nil {
		return out, err
	}
	req, err := targets.Decode(payload)
	if err != nil {
		return out, err
	}
	req = redactRequest(req, redact)
	out.Request = &req
	return out, nil
}

// redactRequest is req with the params named in DefaultRedactFields or
// redact hidden.
func redactRequest(req targets.Request, redact []string) targets.Request {
	req.Params = redactParams(req.Params, slices.Concat(DefaultRedactFields, redact))
	return req
}

// RequestView is the redacted request a call's hand-off carries for
// operators (the status query, outpost status); a request over
// contract.MaxRequestView is summarised, pointing to the site's full view.
func RequestView(req targets.Request, redact []string) json.RawMessage {
	b, err := json.Marshal(redactRequest(req, redact))
	if err == nil && len(b) <= contract.MaxRequestView {
		return b
	}
	b, _ = json.Marshal(map[string]any{
		"kind": req.Kind, "system": req.System, "method": req.Method, "connection": req.Connection,
		"note": fmt.Sprintf("the request is %d bytes: GET /v1/operations/{id} on the site shows it whole", len(b)),
	})
	return b
}

// redactParams copies params with the values of names in redact replaced,
// in nested objects too.
func redactParams(params map[string]any, redact []string) map[string]any {
	if params == nil {
		return nil
	}
	out := make(map[string]any, len(params))
	for k, v := range params {
		switch {
		case slices.ContainsFunc(redact, func(r string) bool { return strings.EqualFold(r, k) }):
			out[k] = redacted
		case isObject(v):
			out[k] = redactParams(v.(map[string]any), redact)
		default:
			out[k] = v
		}
	}
	return out
}

func isObject(v any) bool {
	_, ok := v.(map[string]any)
	return ok
}
