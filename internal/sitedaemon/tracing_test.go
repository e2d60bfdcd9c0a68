package sitedaemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap/zaptest"

	"github.com/outpost-dev/outpost/site"
)

// callerTraceParent is a sampled span of a caller's trace.
const (
	callerTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID      = "00f067aa0ba902b7"
	callerTraceParent = "00-" + callerTraceID + "-" + callerSpanID + "-01"
)

// A traced API continues the caller's traceparent in a span named by its
// route, and the buffered row keeps that span as its traceparent, so the
// hand-off, later, joins the caller's trace.
func TestTracedAPIKeepsTheCallersTraceOnTheRow(t *testing.T) {
	t.Parallel()
	c, store := openClient(t, site.Options{SiteID: "plant-1", Node: "node-a", MaxBodyBytes: 1024})
	spans := tracetest.NewSpanRecorder()
	h := NewAPI(c, APIOptions{Traces: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))}, zaptest.NewLogger(t))

	id := postTraced(t, h, callerTraceParent)
	ended := spans.Ended()
	require.Len(t, ended, 1)
	api := ended[0]
	require.Equal(t, "POST /v1/notifications", api.Name())
	require.Equal(t, callerTraceID, api.SpanContext().TraceID().String(), "the API span is in the caller's trace")
	require.Equal(t, callerSpanID, api.Parent().SpanID().String(), "under the caller's span")

	row, err := store.Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "00-"+callerTraceID+"-"+api.SpanContext().SpanID().String()+"-01", row.TraceParent)
}

// An untraced API neither reads a caller's traceparent nor keeps one.
func TestUntracedAPIKeepsNoTraceContext(t *testing.T) {
	t.Parallel()
	c, store := openClient(t, site.Options{SiteID: "plant-1", Node: "node-a", MaxBodyBytes: 1024})
	id := postTraced(t, NewAPI(c, APIOptions{}, zaptest.NewLogger(t)), callerTraceParent)
	row, err := store.Get(context.Background(), id)
	require.NoError(t, err)
	require.Empty(t, row.TraceParent)
}

func postTraced(t *testing.T, h http.Handler, traceParent string) string {
	t.Helper()
	r := apiRequest(http.MethodPost, "/v1/notifications", `{"list":"ops","subject":"Pump 3 tripped"}`)
	r.Header.Set("traceparent", traceParent)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	require.Equal(t, http.StatusAccepted, rec.Code, rec.Body.String())
	var acc Accepted
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &acc))
	return acc.ID
}
