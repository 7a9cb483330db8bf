package main

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// fakeCollector is an OTLP/gRPC trace endpoint in this process that keeps what it receives.
type fakeCollector struct {
	collector.UnimplementedTraceServiceServer
	mu       sync.Mutex
	received []*tracepb.ResourceSpans
}

func (c *fakeCollector) Export(_ context.Context, req *collector.ExportTraceServiceRequest) (*collector.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.received = append(c.received, req.GetResourceSpans()...)
	return &collector.ExportTraceServiceResponse{}, nil
}

// serviceOf is the service.name of the resource that sent span name, "" when none did.
func (c *fakeCollector) serviceOf(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range c.received {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				if s.GetName() != name {
					continue
				}
				for _, kv := range rs.GetResource().GetAttributes() {
					if kv.GetKey() == "service.name" {
						return kv.GetValue().GetStringValue()
					}
				}
				return "(no service.name)"
			}
		}
	}
	return ""
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a span is at the endpoint as soon as it ends, under
// the worker's service name. Without it, nothing is installed.
func TestTracingExportsToTheEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	prev := otel.GetTracerProvider()
	shutdown, err := setupTracing(context.Background(), appName)
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != prev {
		t.Fatal("a tracer provider was installed without OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	_ = shutdown(context.Background())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeCollector{}
	g := grpc.NewServer()
	collector.RegisterTraceServiceServer(g, c)
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+l.Addr().String())
	shutdown, err = setupTracing(context.Background(), appName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	_, span := otel.Tracer("test").Start(context.Background(), "exported")
	span.End()
	// Synchronous export: the span is there once End returns, before any flush.
	if got := c.serviceOf("exported"); got != appName {
		t.Fatalf("the endpoint has the span from service %q, want %q", got, appName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
