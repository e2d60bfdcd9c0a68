package redact_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/redact"
	"github.com/outpost-dev/outpost/internal/targets"
)

// The request a call's hand-off carries for operators is redacted, and a
// large one is summarised (it travels in the workflow's history).
func TestRequestViewIsRedactedAndBounded(t *testing.T) {
	t.Parallel()
	req := targets.Request{Kind: contract.KindExternalCall, System: "erp", Method: "createOrder",
		Params: map[string]any{"sku": "P-1", "apiKey": "k3y", "login": map[string]any{"password": "pw", "user": "ana"}, "pin": "12"}}
	view := string(redact.RequestView(req, []string{"pin"}))
	require.Contains(t, view, `"sku":"P-1"`)
	require.Contains(t, view, `"user":"ana"`)
	for _, secret := range []string{"k3y", `"pw"`, `"12"`} {
		require.NotContains(t, view, secret)
	}
	req.Params = map[string]any{"blob": strings.Repeat("x", contract.MaxRequestView)}
	view = string(redact.RequestView(req, nil))
	require.LessOrEqual(t, len(view), contract.MaxRequestView)
	require.Contains(t, view, "GET /v1/operations/{id} on the site shows it whole")
	require.NotContains(t, view, "xxxx")
}
