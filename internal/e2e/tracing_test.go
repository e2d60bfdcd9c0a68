package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/outpost-dev/outpost/contract"
	"github.com/outpost-dev/outpost/internal/config"
	"github.com/outpost-dev/outpost/internal/sitedaemon"
	"github.com/outpost-dev/outpost/internal/tracing"
)

// One notification is one trace: the caller's traceparent reaches the site
// API's span, the hand-off that may come much later, the workflow start,
// the workflow run on central and its delivery attempt, all exported over
// OTLP by site and central to one collector.
func TestNotificationIsOneTrace(t *testing.T) {
	collector := startOTLPReceiver(t)
	s := newStack(t, func(cfg *config.Config) { cfg.Telemetry.OTLPEndpoint = collector.endpoint })
	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	id := postNotificationTraced(t, s.siteURL, "00-"+callerTrace+"-"+callerSpan+"-01")
	// The site answers 202 before its forwarder starts the workflow: wait
	// for the delivery through the site's status, not for a workflow that
	// may not exist yet.
	s.waitStatus(contract.StatusDelivered, 2*time.Minute, id)
	s.flushTraces()

	spans := collector.spansAbout(id, contract.NotificationWorkflowID(id))
	names := map[string]bool{}
	for _, sp := range spans {
		require.Equal(t, callerTrace, hex.EncodeToString(sp.span.TraceId), "span %s (%s) is in another trace", sp.span.Name, sp.service)
		names[sp.span.Name] = true
	}
	require.True(t, names["POST /v1/notifications"], "the site API's span: got %v", names)
	require.True(t, names["hand-off "+contract.KindNotification], "the forwarder's hand-off: got %v", names)
	require.True(t, hasPrefix(names, "StartWorkflow:", "SignalWithStartWorkflow:"), "the workflow's start: got %v", names)
	require.True(t, hasPrefix(names, "RunWorkflow:"), "the workflow's run on central: got %v", names)
	require.True(t, hasPrefix(names, "RunActivity:RecordAndDeliverNotification", "RunActivity:DeliverNotification"),
		"the delivery attempt: got %v", names)
	for _, sp := range spans {
		if sp.span.Name == "POST /v1/notifications" {
			require.Equal(t, callerSpan, hex.EncodeToString(sp.span.ParentSpanId), "the API span continues the caller's span")
			require.Equal(t, tracing.ServiceSite, sp.service)
		}
		if strings.HasPrefix(sp.span.Name, "RunWorkflow:") {
			require.Equal(t, tracing.ServiceCentral, sp.service)
		}
	}
}

// postNotificationTraced posts a notification with a traceparent header
// and returns its id.
func postNotificationTraced(t *testing.T, siteURL, traceParent string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, siteURL+"/v1/notifications",
		strings.NewReader(`{"list":"ops","subject":"Pump 3 tripped","body":"Pressure low","script":"e2e"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceParent)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	var acc sitedaemon.Accepted
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&acc))
	return acc.ID
}

func hasPrefix(names map[string]bool, prefixes ...string) bool {
	for name := range names {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
	}
	return false
}

// otlpReceiver is an OpenTelemetry collector's OTLP/gRPC trace receiver in
// process: it keeps every span exported to it.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	endpoint string

	mu    sync.Mutex
	spans []receivedSpan
}

// receivedSpan is a span and the service.name of the process that sent it.
type receivedSpan struct {
	service string
	span    *tracepb.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &otlpReceiver{endpoint: "http://" + ln.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go srv.Serve(ln) //nolint:errcheck // ends with Stop
	t.Cleanup(srv.Stop)
	return r
}

// Export keeps the request's spans.
func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				r.spans = append(r.spans, receivedSpan{service: service, span: sp})
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// spansAbout is every span received that names the operation id or its
// workflow id, and every span of the traces those are in.
func (r *otlpReceiver) spansAbout(operationID, workflowID string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	traces := map[string]bool{}
	for _, sp := range r.spans {
		for _, kv := range sp.span.Attributes {
			if v := kv.GetValue().GetStringValue(); (kv.Key == "outpost.operation_id" && v == operationID) ||
				(kv.Key == "temporalWorkflowID" && v == workflowID) {
				traces[hex.EncodeToString(sp.span.TraceId)] = true
			}
		}
	}
	var about []receivedSpan
	for _, sp := range r.spans {
		if traces[hex.EncodeToString(sp.span.TraceId)] {
			about = append(about, sp)
		}
	}
	return about
}
