package site

import (
	"context"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/redact"
	"github.com/outpost-dev/outpost/internal/targets"
)

// DefaultRedactFields are the parameter names whose values the status API
// never shows (site.redact_fields adds more), matched without regard to
// case, at any depth of params.
var DefaultRedactFields = redact.DefaultFields

// OperationDetails is a cached call's tracking row and, while the site still
// holds it (until it is delivered or discarded), what it sends: the system,
// method and params, or the connection, SQL and args. Secret params are
// redacted.
type OperationDetails struct {
	contract.TrackedOperation
	Request *targets.Request `json:"request,omitempty"`
}

// Details returns an operation's tracking row and its buffered request,
// with the params named in DefaultRedactFields or hide hidden.
func (t Tracking) Details(ctx context.Context, id string, hide []string) (OperationDetails, error) {
	if err := checkOperationID(id); err != nil {
		return OperationDetails{}, err
	}
	row, payload, err := t.store.GetOperationAndPayload(ctx, id)
	if err != nil {
		return OperationDetails{}, operationError(id, err)
	}
	out := OperationDetails{TrackedOperation: row}
	if payload == nil {
		return out, nil // delivered or discarded: the payload is gone
	}
	req, err := targets.Decode(payload)
	if err != nil {
		return out, err
	}
	req = redact.Request(req, hide)
	out.Request = &req
	return out, nil
}
