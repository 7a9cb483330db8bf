package waymark

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Tests of the worker's spans (contract/tracing.md) against the fake server: the spans go to
// an in-memory exporter, and what the worker sends is read off the fake stream.

// The trace a dispatch says the workflow belongs to, as the server would hand it over.
const (
	dispatchTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	dispatchSpanID  = "00f067aa0ba902b7"
	dispatchParent  = "00-" + dispatchTraceID + "-" + dispatchSpanID + "-01"
)

// spanLog is an in-memory exporter that says when spans arrive, so a test waits for the spans
// it expects instead of for a while.
type spanLog struct {
	*tracetest.InMemoryExporter
	mu      sync.Mutex
	changed chan struct{}
}

func (l *spanLog) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := l.InMemoryExporter.ExportSpans(ctx, spans)
	l.mu.Lock()
	close(l.changed)
	l.changed = make(chan struct{})
	l.mu.Unlock()
	return err
}

// waitFor waits until the ended spans satisfy cond, failing the test after a generous deadline.
func (l *spanLog) waitFor(t *testing.T, what string, cond func(tracetest.SpanStubs) bool) tracetest.SpanStubs {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		spans, changed := l.GetSpans(), l.changed
		l.mu.Unlock()
		if cond(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; the spans ended: %v", what, spanNames(spans))
		}
	}
}

// waitForSpan waits for the span named name to end and returns it.
func (l *spanLog) waitForSpan(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	spans := l.waitFor(t, "span "+name, func(s tracetest.SpanStubs) bool { _, ok := spanNamed(s, name); return ok })
	s, _ := spanNamed(spans, name)
	return s
}

func spanNamed(spans tracetest.SpanStubs, name string) (tracetest.SpanStub, bool) {
	for _, s := range spans {
		if s.Name == name {
			return s, true
		}
	}
	return tracetest.SpanStub{}, false
}

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}

func newSpanLog() *spanLog {
	return &spanLog{InMemoryExporter: tracetest.NewInMemoryExporter(), changed: make(chan struct{})}
}

// tracedWorker is a fake-server worker whose spans go to the returned log, synchronously.
func tracedWorker(t *testing.T, opts WorkerOptions) (*Worker, *spanLog) {
	log := newSpanLog()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(log))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opts.TracerProvider = tp
	return fakeWorker(t, opts), log
}

func attrOf(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs fails the test unless s has every one of want.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want ...attribute.KeyValue) {
	t.Helper()
	for _, kv := range want {
		got, ok := attrOf(s, kv.Key)
		if !ok || got != kv.Value {
			t.Errorf("span %s: attribute %s = %v (set: %v), want %v", s.Name, kv.Key, got.Emit(), ok, kv.Value.Emit())
		}
	}
}

// wantChild fails the test unless child is a span of kind under parent, in parent's trace.
func wantChild(t *testing.T, child, parent tracetest.SpanStub, kind trace.SpanKind) {
	t.Helper()
	if child.SpanKind != kind {
		t.Errorf("span %s is %v, want %v", child.Name, child.SpanKind, kind)
	}
	if child.Parent.SpanID() != parent.SpanContext.SpanID() || child.SpanContext.TraceID() != parent.SpanContext.TraceID() {
		t.Errorf("span %s has parent %s in trace %s, want %s (%s) in %s", child.Name, child.Parent.SpanID(),
			child.SpanContext.TraceID(), parent.SpanContext.SpanID(), parent.Name, parent.SpanContext.TraceID())
	}
}

// traceparentOf is the traceparent a span's context goes on the wire as.
func traceparentOf(s tracetest.SpanStub) string {
	return fmt.Sprintf("00-%s-%s-%s", s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.SpanContext.TraceFlags())
}

// traceAnswer answers like a healthy server, and also a remote step call (delivered with
// callOutcome's result) and a child start.
func traceAnswer(callFailure *pb.Failure) func(*pb.WorkerMessage) *pb.Reply {
	return func(m *pb.WorkerMessage) *pb.Reply {
		switch {
		case m.GetCallStep() != nil:
			res := &pb.CallResult{Outcome: pb.RecvResult_OUTCOME_DELIVERED, Attempts: 1}
			if callFailure != nil {
				res.Failure = callFailure
			} else {
				res.Output = anyPayload(42)
			}
			return &pb.Reply{Result: &pb.Reply_CallResult{CallResult: res}}
		case m.GetStartChild() != nil:
			return &pb.Reply{Result: &pb.Reply_ChildStarted{ChildStarted: &pb.ChildStarted{ChildWorkflowId: "kid-1"}}}
		case m.GetStepResult() != nil:
			return &pb.Reply{Result: &pb.Reply_StepRecorded{StepRecorded: &pb.StepRecorded{}}}
		}
		return okReply(m)
	}
}

// anyPayload is v as a payload, for values mustPayload does not take.
func anyPayload(v any) *pb.Payload {
	p, err := toPayload(v)
	if err != nil {
		panic(err)
	}
	return p
}

func dispatchTraced(f *fakeServer, d *pb.DispatchWorkflow) {
	f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_DispatchWorkflow{DispatchWorkflow: d}})
}

func callSteps(msgs []*pb.WorkerMessage) []*pb.CallStep {
	var out []*pb.CallStep
	for _, m := range msgs {
		if c := m.GetCallStep(); c != nil {
			out = append(out, c)
		}
	}
	return out
}

func childStarts(msgs []*pb.WorkerMessage) []*pb.StartChild {
	var out []*pb.StartChild
	for _, m := range msgs {
		if c := m.GetStartChild(); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// A dispatch with a trace context: the run's span is its child, the step, call, child-start
// and wait spans are the run's, and the call and the child start carry their own spans'
// contexts, in the dispatch's trace.
func TestTraceWorkflowSpansJoinTheDispatchTrace(t *testing.T) {
	w, spans := tracedWorker(t, WorkerOptions{ParkAfter: -1})
	var stepSpan trace.SpanContext
	RegisterWorkflow(w, "traced", func(ctx Context, _ any) (int, error) {
		n, err := Step(ctx, "price", func(ctx context.Context) (int, error) {
			stepSpan = trace.SpanContextFromContext(ctx)
			return 7, nil
		})
		if err != nil {
			return 0, err
		}
		m, err := CallStep[int](ctx, "remote", n)
		if err != nil {
			return 0, err
		}
		if _, err := StartChild(ctx, "kid", nil, nil); err != nil {
			return 0, err
		}
		return n + m, nil
	})
	f := startFake(t, w, traceAnswer(nil))
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "wf-1", WorkflowName: "traced", Epoch: 3,
		TraceContext: &pb.TraceContext{Traceparent: dispatchParent, Tracestate: "vendor=1"}})
	msgs := f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })
	if c := completions(msgs)[0]; c.GetFailure() != nil {
		t.Fatalf("workflow failed: %v", c.GetFailure())
	}

	wf := spans.waitForSpan(t, "workflow traced")
	if wf.SpanKind != trace.SpanKindConsumer {
		t.Errorf("workflow span is %v, want CONSUMER", wf.SpanKind)
	}
	if wf.Parent.TraceID().String() != dispatchTraceID || wf.Parent.SpanID().String() != dispatchSpanID || !wf.Parent.IsRemote() {
		t.Errorf("workflow span's parent is %s/%s, want the dispatch's %s/%s", wf.Parent.TraceID(), wf.Parent.SpanID(), dispatchTraceID, dispatchSpanID)
	}
	if wf.SpanContext.TraceID().String() != dispatchTraceID {
		t.Errorf("workflow span is in trace %s, want %s", wf.SpanContext.TraceID(), dispatchTraceID)
	}
	if got := wf.SpanContext.TraceState().Get("vendor"); got != "1" {
		t.Errorf("workflow span lost the dispatch's tracestate: vendor=%q", got)
	}
	if wf.Status.Code != otelcodes.Unset {
		t.Errorf("workflow span status %v, want unset", wf.Status)
	}
	wantAttrs(t, wf, attrWorkflowID.String("wf-1"), attrWorkflowName.String("traced"), attrEpoch.Int64(3),
		attrReplay.Bool(false), attrRecoveryAttempts.Int64(0))

	step := spans.waitForSpan(t, "step price")
	wantChild(t, step, wf, trace.SpanKindInternal)
	wantAttrs(t, step, attrWorkflowID.String("wf-1"), attrStepID.Int64(0), attrStepName.String("price"))
	if !stepSpan.Equal(step.SpanContext) {
		t.Errorf("the step's function ran in span %v, want the step's span %v", stepSpan.SpanID(), step.SpanContext.SpanID())
	}

	call := spans.waitForSpan(t, "call remote")
	wantChild(t, call, wf, trace.SpanKindClient)
	wantAttrs(t, call, attrWorkflowID.String("wf-1"), attrStepID.Int64(1), attrStepName.String("remote"), attrStepAttempt.Int64(1))
	cs := callSteps(msgs)
	if len(cs) == 0 {
		t.Fatal("no CallStep sent")
	}
	for _, c := range cs {
		if got := c.GetTraceContext().GetTraceparent(); got != traceparentOf(call) {
			t.Errorf("CallStep carried traceparent %q, want the call span's %q", got, traceparentOf(call))
		}
		if !strings.Contains(c.GetTraceContext().GetTracestate(), "vendor=1") {
			t.Errorf("CallStep carried tracestate %q, want the trace's vendor=1", c.GetTraceContext().GetTracestate())
		}
	}

	start := spans.waitForSpan(t, "start child kid")
	wantChild(t, start, wf, trace.SpanKindProducer)
	wantAttrs(t, start, attrWorkflowID.String("wf-1"), attrStepID.Int64(2))
	sc := childStarts(msgs)
	if len(sc) != 1 || sc[0].GetTraceContext().GetTraceparent() != traceparentOf(start) {
		t.Fatalf("StartChild carried %v, want the start-child span's %q", sc, traceparentOf(start))
	}
	if !strings.HasPrefix(traceparentOf(start), "00-"+dispatchTraceID+"-") {
		t.Errorf("child start's traceparent %q is not in the dispatch's trace", traceparentOf(start))
	}
}

// A failed remote step marks its call span, and the workflow that fails with it its run span.
func TestTraceFailuresSetErrorStatus(t *testing.T) {
	w, spans := tracedWorker(t, WorkerOptions{ParkAfter: -1})
	RegisterWorkflow(w, "fails", func(ctx Context, _ any) (int, error) {
		if _, err := Step(ctx, "flaky", func(context.Context) (int, error) { return 0, errors.New("no luck") }); err == nil {
			return 0, errors.New("the step should have failed")
		}
		return CallStep[int](ctx, "remote", nil)
	})
	f := startFake(t, w, traceAnswer(&pb.Failure{Kind: "StepFailed", Message: "remote broke"}))
	f.dispatch("wf-f", "fails")
	f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })

	step := spans.waitForSpan(t, "step flaky")
	if step.Status.Code != otelcodes.Error || step.Status.Description != "no luck" {
		t.Errorf("failed step's span status %v, want ERROR: no luck", step.Status)
	}
	call := spans.waitForSpan(t, "call remote")
	if call.Status.Code != otelcodes.Error || call.Status.Description != "remote broke" {
		t.Errorf("failed call's span status %v, want ERROR: remote broke", call.Status)
	}
	wf := spans.waitForSpan(t, "workflow fails")
	if wf.Status.Code != otelcodes.Error || !strings.Contains(wf.Status.Description, "remote broke") {
		t.Errorf("failed workflow's span status %v, want ERROR with the failure's message", wf.Status)
	}
	// No trace context: the run starts a trace of its own.
	if wf.Parent.IsValid() {
		t.Errorf("a dispatch without a trace context gave the run parent %v", wf.Parent)
	}
}

// A dispatch that carries recorded steps, or comes after a recovery, is a replay: the recorded
// step opens no span (its function is not called), and the step that runs now does.
func TestTraceReplayedStepsOpenNoSpan(t *testing.T) {
	w, spans := tracedWorker(t, WorkerOptions{ParkAfter: -1})
	var calls sync.Map
	RegisterWorkflow(w, "again", func(ctx Context, _ any) (int, error) {
		a, err := Step(ctx, "a", func(context.Context) (int, error) { calls.Store("a", true); return 1, nil })
		if err != nil {
			return 0, err
		}
		b, err := Step(ctx, "b", func(context.Context) (int, error) { calls.Store("b", true); return 2, nil })
		return a + b, err
	})
	f := startFake(t, w, okReply)
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "wf-r", WorkflowName: "again", Epoch: 2,
		Steps:        []*pb.Step{{StepId: 0, Name: "a", Output: anyPayload(1), Attempts: 1}},
		TraceContext: &pb.TraceContext{Traceparent: dispatchParent}})
	f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })

	wf := spans.waitForSpan(t, "workflow again")
	wantAttrs(t, wf, attrReplay.Bool(true), attrEpoch.Int64(2), attrRecoveryAttempts.Int64(0))
	b := spans.waitForSpan(t, "step b")
	wantChild(t, b, wf, trace.SpanKindInternal)
	wantAttrs(t, b, attrStepID.Int64(1))
	if _, ok := spanNamed(spans.GetSpans(), "step a"); ok {
		t.Error("the replayed step opened a span")
	}
	if _, ok := calls.Load("a"); ok {
		t.Error("the replayed step's function ran")
	}

	// A recovery with no step recorded yet replays too.
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "wf-r2", WorkflowName: "again", Epoch: 1, RecoveryAttempts: 2})
	f.waitFor("the second completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 2 })
	spans.waitFor(t, "the recovered run's span", func(s tracetest.SpanStubs) bool {
		for _, sp := range s {
			if v, _ := attrOf(sp, attrWorkflowID); sp.Name == "workflow again" && v.AsString() == "wf-r2" {
				wantAttrs(t, sp, attrReplay.Bool(true), attrRecoveryAttempts.Int64(2))
				return true
			}
		}
		return false
	})
}

// A remote step attempt served here is a CONSUMER span under the calling span the dispatch
// carries, failed when the attempt failed; its function runs in it.
func TestTraceServedStepIsAConsumerSpan(t *testing.T) {
	w, spans := tracedWorker(t, WorkerOptions{})
	var inStep trace.SpanContext
	RegisterStep(w, "double", func(ctx context.Context, n int) (int, error) {
		inStep = trace.SpanContextFromContext(ctx)
		if n < 0 {
			return 0, errors.New("negative")
		}
		return 2 * n, nil
	})
	f := startFake(t, w, traceAnswer(nil))
	f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_DispatchStep{DispatchStep: &pb.DispatchStep{
		WorkflowId: "caller", StepId: 4, StepName: "double", Input: anyPayload(21), Attempt: 2,
		TraceContext: &pb.TraceContext{Traceparent: dispatchParent},
	}}})
	f.waitFor("the step's result", func(m []*pb.WorkerMessage) bool {
		for _, x := range m {
			if x.GetStepResult() != nil {
				return true
			}
		}
		return false
	})
	s := spans.waitForSpan(t, "step double")
	if s.SpanKind != trace.SpanKindConsumer {
		t.Errorf("served step span is %v, want CONSUMER", s.SpanKind)
	}
	if s.Parent.TraceID().String() != dispatchTraceID || s.Parent.SpanID().String() != dispatchSpanID {
		t.Errorf("served step's parent is %s/%s, want the calling span %s/%s", s.Parent.TraceID(), s.Parent.SpanID(), dispatchTraceID, dispatchSpanID)
	}
	wantAttrs(t, s, attrWorkflowID.String("caller"), attrStepID.Int64(4), attrStepName.String("double"), attrStepAttempt.Int64(2))
	if s.Status.Code != otelcodes.Unset {
		t.Errorf("successful attempt's status %v", s.Status)
	}
	if !inStep.Equal(s.SpanContext) {
		t.Errorf("the step's function ran in span %v, want %v", inStep.SpanID(), s.SpanContext.SpanID())
	}

	// A failed attempt, with no calling span: a trace of its own, status ERROR.
	f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_DispatchStep{DispatchStep: &pb.DispatchStep{
		WorkflowId: "caller", StepId: 5, StepName: "double", Input: anyPayload(-1), Attempt: 1,
	}}})
	failed := spans.waitFor(t, "the failed attempt's span", func(s tracetest.SpanStubs) bool { return len(s) == 2 })[1]
	if failed.Status.Code != otelcodes.Error || failed.Status.Description != "negative" {
		t.Errorf("failed attempt's status %v, want ERROR: negative", failed.Status)
	}
	if failed.Parent.IsValid() {
		t.Errorf("an attempt without a calling span has parent %v", failed.Parent)
	}
}

// Waits that are not over open `wait <kind>` spans under the run's; recorded ones open none.
func TestTraceWaitSpans(t *testing.T) {
	w, spans := tracedWorker(t, WorkerOptions{ParkAfter: -1})
	RegisterWorkflow(w, "waits", func(ctx Context, _ any) (bool, error) {
		// Long enough not to be over once its wake time is recorded; a sleep over by then
		// waits for nothing, and opens no span.
		if err := Sleep(ctx, 200*time.Millisecond); err != nil {
			return false, err
		}
		_, ok, err := Recv[string](ctx, "inbox", time.Hour)
		return ok, err
	})
	f := startFake(t, w, func(m *pb.WorkerMessage) *pb.Reply {
		if m.GetRecv() != nil {
			return &pb.Reply{Result: &pb.Reply_RecvResult{RecvResult: &pb.RecvResult{
				Outcome: pb.RecvResult_OUTCOME_DELIVERED, Message: anyPayload("hi")}}}
		}
		return okReply(m)
	})
	// The sleep is recorded and over: only the receive waits now.
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "wf-w", WorkflowName: "waits", Epoch: 1,
		Steps: []*pb.Step{{StepId: 0, Name: sleepStep, Output: mustPayload(map[string]any{"wake_at_ms": 1})}}})
	f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })
	wf := spans.waitForSpan(t, "workflow waits")
	recv := spans.waitForSpan(t, "wait recv")
	wantChild(t, recv, wf, trace.SpanKindInternal)
	wantAttrs(t, recv, attrWorkflowID.String("wf-w"), attrWaitTopic.String("inbox"), attrStepID.Int64(1))
	if _, ok := spanNamed(spans.GetSpans(), "wait sleep"); ok {
		t.Error("a recorded sleep that is over opened a span")
	}

	// Live, the sleep waits now.
	f.dispatch("wf-w2", "waits")
	f.waitFor("the second completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 2 })
	sleep := spans.waitForSpan(t, "wait sleep")
	wantAttrs(t, sleep, attrWorkflowID.String("wf-w2"), attrStepID.Int64(0))
}

// Without OpenTelemetry installed (the global provider, a no-op) and without a trace context,
// the worker sends no trace context and runs as ever; with one, it passes it on untouched.
func TestTraceNothingWithoutOpenTelemetry(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{ParkAfter: -1})
	RegisterWorkflow(w, "plain", func(ctx Context, _ any) (int, error) {
		if _, err := Step(ctx, "s", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return 0, err
		}
		if _, err := StartChild(ctx, "kid", nil, nil); err != nil {
			return 0, err
		}
		return CallStep[int](ctx, "remote", nil)
	})
	f := startFake(t, w, traceAnswer(nil))
	f.dispatch("wf-p", "plain")
	msgs := f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })
	if c := completions(msgs)[0]; c.GetFailure() != nil {
		t.Fatalf("workflow failed: %v", c.GetFailure())
	}
	for _, c := range callSteps(msgs) {
		if c.GetTraceContext() != nil {
			t.Errorf("CallStep carried a trace context without a trace: %v", c.GetTraceContext())
		}
	}
	for _, c := range childStarts(msgs) {
		if c.GetTraceContext() != nil {
			t.Errorf("StartChild carried a trace context without a trace: %v", c.GetTraceContext())
		}
	}

	// Dispatched in a trace, the worker without an SDK passes that trace on as it came.
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "wf-p2", WorkflowName: "plain", Epoch: 1,
		TraceContext: &pb.TraceContext{Traceparent: dispatchParent}})
	msgs = f.waitFor("the second completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 2 })
	for _, c := range callSteps(msgs) {
		if c.GetWorkflowId() == "wf-p2" && c.GetTraceContext().GetTraceparent() != dispatchParent {
			t.Errorf("CallStep carried %v, want the dispatch's trace passed on", c.GetTraceContext())
		}
	}
	for _, c := range childStarts(msgs) {
		if c.GetWorkflowId() == "wf-p2" && c.GetTraceContext().GetTraceparent() != dispatchParent {
			t.Errorf("StartChild carried %v, want the dispatch's trace passed on", c.GetTraceContext())
		}
	}
}

// A Replayer replays: it opens no span, even with a provider that records.
func TestTraceReplayerOpensNoSpan(t *testing.T) {
	w, spans := tracedWorker(t, WorkerOptions{})
	RegisterWorkflow(w, "offline", func(ctx Context, _ any) (int, error) {
		return Step(ctx, "a", func(context.Context) (int, error) { return 1, nil })
	})
	got, err := NewReplayer(w).Replay(context.Background(), &RecordedHistory{WorkflowName: "offline",
		Steps: []RecordedStep{{StepID: 0, Name: "a", Output: []byte("1")}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.(Returned); !ok {
		t.Fatalf("replay: %v", got)
	}
	if s := spans.GetSpans(); len(s) != 0 {
		t.Fatalf("a replay opened spans: %v", spanNames(s))
	}
}

// Waiting for a child, an event and the first of several: `wait child`, `wait event` (with its
// key) and `wait select`, each at its position.
func TestTraceChildEventAndSelectWaits(t *testing.T) {
	w, spans := tracedWorker(t, WorkerOptions{ParkAfter: -1})
	RegisterWorkflow(w, "joins", func(ctx Context, _ any) (int, error) {
		if _, err := WaitFirst(ctx, WorkflowRef("other")); err != nil {
			return 0, err
		}
		n, err := AwaitChild[int](ctx, "other")
		if err != nil {
			return 0, err
		}
		_, _, err = GetEvent[string](ctx, "other", "ready", time.Hour)
		return n, err
	})
	f := startFake(t, w, func(m *pb.WorkerMessage) *pb.Reply {
		switch {
		case m.GetSelect() != nil:
			return &pb.Reply{Result: &pb.Reply_Selected{Selected: &pb.Selected{Outcome: pb.RecvResult_OUTCOME_DELIVERED}}}
		case m.GetAwaitChild() != nil:
			return &pb.Reply{Result: &pb.Reply_ChildResult{ChildResult: &pb.ChildResult{
				Outcome: pb.RecvResult_OUTCOME_DELIVERED, Status: pb.WorkflowStatus_WORKFLOW_STATUS_SUCCESS, Output: anyPayload(5)}}}
		case m.GetGetEvent() != nil:
			return &pb.Reply{Result: &pb.Reply_EventResult{EventResult: &pb.EventResult{
				Outcome: pb.RecvResult_OUTCOME_DELIVERED, Value: anyPayload("yes")}}}
		}
		return okReply(m)
	})
	f.dispatch("wf-j", "joins")
	msgs := f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })
	if c := completions(msgs)[0]; c.GetFailure() != nil {
		t.Fatalf("workflow failed: %v", c.GetFailure())
	}
	wf := spans.waitForSpan(t, "workflow joins")
	for _, want := range []struct {
		name  string
		attrs []attribute.KeyValue
	}{
		{"wait select", []attribute.KeyValue{attrStepID.Int64(0)}},
		{"wait child", []attribute.KeyValue{attrStepID.Int64(1)}},
		{"wait event", []attribute.KeyValue{attrStepID.Int64(2), attrWaitKey.String("ready")}},
	} {
		s := spans.waitForSpan(t, want.name)
		wantChild(t, s, wf, trace.SpanKindInternal)
		wantAttrs(t, s, append(want.attrs, attrWorkflowID.String("wf-j"))...)
	}
}
