package sitedaemon

// Tracing: the API continues the caller's W3C trace context, each buffered
// row keeps its call's span as a traceparent, and the forwarder's hand-off
// continues that trace (the Temporal client's interceptor carries it on
// into the workflow). The daemon traces only when given a tracer provider.

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName is the instrumentation scope of the daemon's spans.
const tracerName = "github.com/outpost-dev/outpost/internal/sitedaemon"

// attrOperationID names the operation a span is about, so a trace search
// finds a notification's or call's spans by its id.
const attrOperationID = "outpost.operation_id"

// traceContext reads and writes W3C trace context: the caller's
// traceparent header, and the form a buffered row keeps.
var traceContext = propagation.TraceContext{}

// tracerOf is tp's tracer for the daemon; nil when tp is nil (no tracing).
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// traced runs h in a server span named pattern ("POST /v1/notifications")
// that continues the request's traceparent; h itself when not tracing, so
// an untraced daemon neither reads nor keeps a caller's trace context.
func traced(tracer trace.Tracer, pattern string, h http.HandlerFunc) http.HandlerFunc {
	if tracer == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, pattern, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("http.route", pattern)))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", rec.status))
		if rec.status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(rec.status))
		}
	}
}

// statusRecorder notes the status a handler answered with.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// traceParentOf is the span of ctx as a traceparent, what a buffered row
// keeps; empty when ctx has no span.
func traceParentOf(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	traceContext.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// continueTrace is ctx in the trace of a row's traceparent; ctx itself
// when the row has none.
func continueTrace(ctx context.Context, traceParent string) context.Context {
	if traceParent == "" {
		return ctx
	}
	return traceContext.Extract(ctx, propagation.MapCarrier{"traceparent": traceParent})
}

// handOffTracer is the forwarder's tracer: tp's, or one that records
// nothing when the daemon does not trace.
func handOffTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(tracerName)
	}
	return tp.Tracer(tracerName)
}
