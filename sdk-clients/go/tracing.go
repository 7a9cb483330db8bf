package waymark

import (
	"context"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Tracing (contract/tracing.md): the client puts the caller's span in the metadata of every
// unary call; the worker opens a span for each workflow run, each step it runs, each remote
// step it calls or serves, each child it starts and each wait, and hands the context of the
// ones that lead elsewhere (a remote step, a child) to the server in the request. It uses
// OpenTelemetry's API only: without an SDK installed (a TracerProvider of its own, or
// otel.SetTracerProvider) every span is a no-op and nothing is exported.

// tracerName is the instrumentation scope every span of the SDK is opened under.
const tracerName = "waymark"

// The span attributes of contract/tracing.md.
const (
	attrWorkflowID       = attribute.Key("waymark.workflow.id")
	attrWorkflowName     = attribute.Key("waymark.workflow.name")
	attrEpoch            = attribute.Key("waymark.epoch")
	attrReplay           = attribute.Key("waymark.replay")
	attrRecoveryAttempts = attribute.Key("waymark.recovery_attempts")
	attrStepID           = attribute.Key("waymark.step.id")
	attrStepName         = attribute.Key("waymark.step.name")
	attrStepAttempt      = attribute.Key("waymark.step.attempt")
	attrWaitTopic        = attribute.Key("waymark.wait.topic")
	attrWaitKey          = attribute.Key("waymark.wait.key")
)

// The wire format is W3C Trace Context whatever propagator the program installed globally:
// it is what every SDK and the server read.
var w3c propagation.TraceContext

// traceContextOf is the span in ctx as the wire carries it, nil when ctx holds no valid span
// (the field is then left unset: "no trace").
func traceContextOf(ctx context.Context) *pb.TraceContext {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	if carrier["traceparent"] == "" {
		return nil
	}
	return &pb.TraceContext{Traceparent: carrier["traceparent"], Tracestate: carrier["tracestate"]}
}

// contextWithRemote is ctx with the span tc names as its (remote) parent; ctx as it is when tc
// is empty or malformed, which opens a new trace.
func contextWithRemote(ctx context.Context, tc *pb.TraceContext) context.Context {
	if tc.GetTraceparent() == "" {
		return ctx
	}
	return w3c.Extract(ctx, propagation.MapCarrier{"traceparent": tc.GetTraceparent(), "tracestate": tc.GetTracestate()})
}

// parentFor is the context a span serving work from the server is opened in: the remote span
// the server handed over, or — when it handed none — a context with no span at all, so that
// the span starts a trace of its own instead of joining whatever span the worker's own
// context (Run's) happens to carry.
func parentFor(tc *pb.TraceContext) context.Context {
	return contextWithRemote(trace.ContextWithSpanContext(context.Background(), trace.SpanContext{}), tc)
}

// tracerOf is the tracer a worker's spans are opened with: its provider's, else the global
// one's (which follows a provider installed later).
func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// noTracer opens spans that record nothing: a Replayer's, whose operations are all replayed.
var noTracer = noop.NewTracerProvider().Tracer(tracerName)

// failSpan marks span failed with message.
func failSpan(span trace.Span, message string) {
	span.SetStatus(otelcodes.Error, message)
}

// spans are the spans a run has open besides its workflow span: each ends when what it stands
// for is over, or with the run, whichever is first (a remote step called and never waited
// for, a wait on a goroutine the workflow left behind).
type spans struct {
	mu    sync.Mutex
	open  map[*runSpan]struct{}
	ended bool
}

// runSpan is a span a run keeps open (spans are not all comparable: the set holds pointers).
type runSpan struct{ trace.Span }

// add keeps span until it is ended; a run already over ends it at once.
func (s *spans) add(span *runSpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		span.End()
		return
	}
	if s.open == nil {
		s.open = map[*runSpan]struct{}{}
	}
	s.open[span] = struct{}{}
}

// end ends span, once.
func (s *spans) end(span *runSpan) {
	s.mu.Lock()
	_, ok := s.open[span]
	delete(s.open, span)
	s.mu.Unlock()
	if ok {
		span.End()
	}
}

// endAll ends every span still open; any opened later ends at once.
func (s *spans) endAll() {
	s.mu.Lock()
	open := s.open
	s.open, s.ended = nil, true
	s.mu.Unlock()
	for span := range open {
		span.End()
	}
}

// startSpan opens a span of this run under its workflow span, kept open until endSpan or the
// run's end. ctx is r with the span in it, for the code the span covers.
func (r *run) startSpan(name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, *runSpan) {
	attrs = append(attrs, attrWorkflowID.String(r.id))
	ctx, span := r.tracer.Start(r, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	s := &runSpan{span}
	r.spans.add(s)
	return ctx, s
}

func (r *run) endSpan(span *runSpan) { r.spans.end(span) }

// startWait opens the span of a wait that is not over (`wait <kind>`, INTERNAL).
func (r *run) startWait(kind string, step uint32, attrs ...attribute.KeyValue) *runSpan {
	_, span := r.startSpan("wait "+kind, trace.SpanKindInternal, append(attrs, attrStepID.Int64(int64(step)))...)
	return span
}

// startWorkflowSpan opens the span of a workflow run (`workflow <name>`, CONSUMER) under the
// span the dispatch names, and returns the run's base context with it.
func startWorkflowSpan(ctx context.Context, tracer trace.Tracer, d *pb.DispatchWorkflow) (context.Context, trace.Span) {
	_, span := tracer.Start(parentFor(d.GetTraceContext()), "workflow "+d.GetWorkflowName(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attrWorkflowID.String(d.GetWorkflowId()),
			attrWorkflowName.String(d.GetWorkflowName()),
			attrEpoch.Int64(int64(d.GetEpoch())),
			attrReplay.Bool(len(d.GetSteps()) > 0 || d.GetRecoveryAttempts() > 0),
			attrRecoveryAttempts.Int64(int64(d.GetRecoveryAttempts())),
		))
	return trace.ContextWithSpan(ctx, span), span
}

// startServeSpan opens the span of a remote step attempt served here (`step <name>`,
// CONSUMER) under the calling span, and returns ctx with it.
func startServeSpan(ctx context.Context, tracer trace.Tracer, d *pb.DispatchStep) (context.Context, trace.Span) {
	_, span := tracer.Start(parentFor(d.GetTraceContext()), "step "+d.GetStepName(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attrWorkflowID.String(d.GetWorkflowId()),
			attrStepID.Int64(int64(d.GetStepId())),
			attrStepName.String(d.GetStepName()),
			attrStepAttempt.Int64(int64(d.GetAttempt())),
		))
	return trace.ContextWithSpan(ctx, span), span
}

// traceInterceptor puts the caller's span in the metadata of every unary call, as the
// `traceparent` and `tracestate` keys, through the global propagator — which also carries
// whatever else the program installed it for (baggage, another format). Go's default global
// propagator carries nothing, so the W3C fields are filled in when it did not write them:
// the server reads those. No span in ctx: nothing is added.
func traceInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if trace.SpanContextFromContext(ctx).IsValid() && !hasOutgoing(ctx, "traceparent") {
		carrier := metadataCarrier{}
		otel.GetTextMapPropagator().Inject(ctx, carrier)
		if _, ok := carrier["traceparent"]; !ok {
			w3c.Inject(ctx, carrier)
		}
		if len(carrier) > 0 {
			kv := make([]string, 0, 2*len(carrier))
			for k, v := range carrier {
				kv = append(kv, k, v)
			}
			ctx = metadata.AppendToOutgoingContext(ctx, kv...)
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// hasOutgoing: the call's metadata has key already (the caller put a trace context there).
func hasOutgoing(ctx context.Context, key string) bool {
	md, _ := metadata.FromOutgoingContext(ctx)
	return len(md.Get(key)) > 0
}

// metadataCarrier is what a propagator writes into: gRPC metadata keys are lowercase.
type metadataCarrier map[string]string

func (c metadataCarrier) Get(key string) string { return c[strings.ToLower(key)] }
func (c metadataCarrier) Set(key, value string) { c[strings.ToLower(key)] = value }
func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
