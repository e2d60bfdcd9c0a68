// Package tracing exports a process's OpenTelemetry spans to the operators'
// collector over OTLP/gRPC (telemetry.otlp_endpoint). With no endpoint there
// is no provider at all: a nil *Provider turns every span off, so a process
// without tracing pays nothing for it.
package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// Service names of Outpost's processes, the service.name of their spans.
const (
	ServiceSite    = "outpost-site"
	ServiceCentral = "outpost-central"
)

// Options configure tracing of one process.
type Options struct {
	// Endpoint is the collector's OTLP/gRPC receiver, http://host:port or
	// https://host:port (telemetry.otlp_endpoint). Empty: no tracing.
	Endpoint string
}

// Provider is a process's tracer provider; nil when tracing is off.
type Provider struct {
	sdk *sdktrace.TracerProvider
}

// Start returns the tracer provider of service exporting to opts.Endpoint,
// or nil when no endpoint is set. It does not wait for the collector: spans
// are batched and sent in the background, and dropped while it is away.
func Start(ctx context.Context, opts Options, service string) (*Provider, error) {
	if opts.Endpoint == "" {
		return nil, nil
	}
	exporter, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(opts.Endpoint))
	if err != nil {
		return nil, fmt.Errorf("trace exporter for telemetry.otlp_endpoint %s: %w", opts.Endpoint, err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", service))
	return &Provider{sdk: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))}, nil
}

// TracerProvider is what the process's own spans come from; nil when
// tracing is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.sdk
}

// TemporalInterceptors are the client interceptors that carry a trace into
// the workflows a client starts and through the workers created on it
// (RunWorkflow, StartActivity, RunActivity spans); none when tracing is off.
func (p *Provider) TemporalInterceptors() ([]interceptor.ClientInterceptor, error) {
	if p == nil {
		return nil, nil
	}
	i, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer:            p.sdk.Tracer("go.temporal.io/sdk"),
		TextMapPropagator: propagation.TraceContext{}, // W3C, as the site API reads it
		// Status reads (the site API's, the outbox page's) would each be a
		// trace of their own under the operation's workflow: noise.
		DisableQueryTracing: true,
	})
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	return []interceptor.ClientInterceptor{i}, nil
}

// Shutdown sends the spans still batched and stops the exporter: called as
// the process stops, so the last operations' spans are not lost.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}
