// Package redact hides secret call params from what operators see: the
// site's status API (the SDK's Tracking.Details) and the request view a
// cached call's hand-off carries to central (the site daemon's forwarder).
package redact

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/targets"
)

// DefaultFields are the parameter names whose values operators never see
// (site.redact_fields adds more), matched without regard to case, at any
// depth of params.
var DefaultFields = []string{"password", "secret", "token", "apikey", "api_key", "authorization"}

// redacted stands for a value operators do not see.
const redacted = "[redacted]"

// Request is req with the params named in DefaultFields or extra hidden.
func Request(req targets.Request, extra []string) targets.Request {
	req.Params = params(req.Params, slices.Concat(DefaultFields, extra))
	return req
}

// RequestView is the redacted request a call's hand-off carries for
// operators (the status query, outpost status); a request over
// contract.MaxRequestView is summarised, pointing to the site's full view.
func RequestView(req targets.Request, extra []string) json.RawMessage {
	b, err := json.Marshal(Request(req, extra))
	if err == nil && len(b) <= contract.MaxRequestView {
		return b
	}
	b, _ = json.Marshal(map[string]any{
		"kind": req.Kind, "system": req.System, "method": req.Method, "connection": req.Connection,
		"note": fmt.Sprintf("the request is %d bytes: GET /v1/operations/{id} on the site shows it whole", len(b)),
	})
	return b
}

// params copies p with the values of names in hide replaced, in nested
// objects too.
func params(p map[string]any, hide []string) map[string]any {
	if p == nil {
		return nil
	}
	out := make(map[string]any, len(p))
	for k, v := range p {
		switch {
		case slices.ContainsFunc(hide, func(h string) bool { return strings.EqualFold(h, k) }):
			out[k] = redacted
		case isObject(v):
			out[k] = params(v.(map[string]any), hide)
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
