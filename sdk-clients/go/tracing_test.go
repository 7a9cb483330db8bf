package waymark_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// What the client puts in the metadata of its calls for tracing, against the in-process gRPC
// server of auth_test.go (every WorkflowService call there is UNIMPLEMENTED, after its
// metadata is recorded).

const (
	startMethod  = "/waymark.v1.WorkflowService/StartWorkflow"
	cancelMethod = "/waymark.v1.WorkflowService/CancelWorkflow"
	listMethod   = "/waymark.v1.WorkflowService/ListWorkflows"
)

// clientCalls makes one call of each of several kinds with ctx; each is refused as
// UNIMPLEMENTED.
func clientCalls(t *testing.T, c *waymark.Client, ctx context.Context) {
	t.Helper()
	if _, err := c.Start(ctx, "wf", nil, nil); !isCode(err, codes.Unimplemented) {
		t.Fatalf("start: %v", err)
	}
	if _, err := c.Get(ctx, "wf"); !isCode(err, codes.Unimplemented) {
		t.Fatalf("get: %v", err)
	}
	if _, err := c.Cancel(ctx, "wf"); !isCode(err, codes.Unimplemented) {
		t.Fatalf("cancel: %v", err)
	}
	if _, _, err := c.List(ctx, nil); !isCode(err, codes.Unimplemented) {
		t.Fatalf("list: %v", err)
	}
}

// lastCall is the metadata of the last call to method.
func lastCall(t *testing.T, s *goServer, method string) metadata.MD {
	t.Helper()
	calls := s.metadataOf(method)
	if len(calls) == 0 {
		t.Fatalf("no call to %s reached the server", method)
	}
	return calls[len(calls)-1]
}

func TestClientCallsCarryTheCallersSpan(t *testing.T) {
	clearConnectionEnv(t)
	s := startGoServer(t, nil, nil)
	c, err := waymark.NewClient(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	methods := []string{startMethod, getMethod, cancelMethod, listMethod}

	// No span: nothing is added.
	clientCalls(t, c, testCtx(t))
	for _, m := range methods {
		md := lastCall(t, s, m)
		if len(md.Get("traceparent")) != 0 || len(md.Get("tracestate")) != 0 {
			t.Errorf("%s carried trace metadata without a span: %v", m, md)
		}
	}

	// A span (under a remote parent that has a tracestate): every call carries it.
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	state, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x0a, 1, 2, 3}, SpanID: trace.SpanID{0x0b, 1}, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true,
	})
	ctx, span := tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(testCtx(t), parent), "caller")
	defer span.End()
	want := fmt.Sprintf("00-%s-%s-01", span.SpanContext().TraceID(), span.SpanContext().SpanID())
	clientCalls(t, c, ctx)
	for _, m := range methods {
		md := lastCall(t, s, m)
		if got := md.Get("traceparent"); len(got) != 1 || got[0] != want {
			t.Errorf("%s carried traceparent %v, want [%s]", m, got, want)
		}
		if got := md.Get("tracestate"); len(got) != 1 || got[0] != "vendor=abc" {
			t.Errorf("%s carried tracestate %v, want [vendor=abc]", m, got)
		}
	}

	// The global propagator is used: what the program installed it for goes along.
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	member, err := baggage.NewMember("tenant", "t1")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(member)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(baggage.ContextWithBaggage(ctx, bag), "wf"); !isCode(err, codes.Unimplemented) {
		t.Fatalf("get: %v", err)
	}
	md := lastCall(t, s, getMethod)
	if got := md.Get("traceparent"); len(got) != 1 || got[0] != want {
		t.Errorf("with a global propagator: traceparent %v, want [%s]", got, want)
	}
	if got := md.Get("baggage"); len(got) != 1 || !strings.Contains(got[0], "tenant=t1") {
		t.Errorf("the global propagator's baggage did not go along: %v", got)
	}
}
