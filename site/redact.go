package site

import (
	"context"
	"errors"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/redact"
	"github.com/outpost-dev/outpost/internal/sitestore"
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
	req = redact.Request(req, hide)
	out.Request = &req
	return out, nil
}
