package waymark

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/trace"

	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// StepHandle is a remote step that was called and may still be running. Wait for its result
// with StepResult, or for it among others with WaitFirst and WaitAll.
type StepHandle struct {
	step  uint32
	name  string
	input *pb.Payload
	cfg   stepConfig
	// The `call <name>` span of a call made by this run (nil when the history records it),
	// and its context as CallStep carries it.
	span  *runSpan
	trace *pb.TraceContext
}

// Awaitable is something a workflow can wait for alongside others: a *StepHandle, or a
// WorkflowRef (a child, or any workflow, finishing).
type Awaitable interface {
	waitTarget() *pb.WaitTarget
}

// WorkflowRef names a workflow to wait for with WaitFirst or WaitAll.
type WorkflowRef string

func (w WorkflowRef) waitTarget() *pb.WaitTarget {
	return &pb.WaitTarget{Target: &pb.WaitTarget_WorkflowId{WorkflowId: string(w)}}
}

func (h *StepHandle) waitTarget() *pb.WaitTarget {
	return &pb.WaitTarget{Target: &pb.WaitTarget_StepId{StepId: h.step}}
}

// CallStep calls remote step name with input and waits for its result. Any worker that
// registered the step runs it (in any language); the server retries it per WithRetry (default:
// 3 attempts, 1 s doubling up to 60 s) and fails an attempt past WithTimeout (default 5
// minutes). The result is recorded as this workflow's step, so a replay — even on another
// worker after this one died — gets it without calling again.
func CallStep[O any](ctx Context, name string, input any, opts ...StepOption) (O, error) {
	h, err := StartStep(ctx, name, input, opts...)
	if err != nil {
		var zero O
		return zero, err
	}
	return StepResult[O](ctx, h)
}

// StartStep calls remote step name without waiting for it: the call is durable when it
// returns. Wait with StepResult, WaitFirst or WaitAll. An input larger than the server takes is
// not sent (ErrPayloadTooLarge).
func StartStep(ctx Context, name string, input any, opts ...StepOption) (*StepHandle, error) {
	r := ctx.run()
	step, err := r.take(1)
	if err != nil {
		return nil, err
	}
	payload, err := toPayload(input)
	if err != nil {
		return nil, err
	}
	h := &StepHandle{step: step, name: name, input: payload, cfg: stepOptions(opts)}
	// Its result is read by StepResult; here only that the history agrees it was called.
	if _, ok, err := r.hist.at(step, name); ok {
		return h, err
	}
	if err := r.stopped(); err != nil {
		return nil, err
	}
	// Open until the result is delivered (StepResult) or the run ends.
	var sctx context.Context
	sctx, h.span = r.startSpan("call "+name, trace.SpanKindClient, attrStepID.Int64(int64(step)), attrStepName.String(name))
	h.trace = traceContextOf(sctx)
	if _, err := r.call(h); err != nil {
		failSpan(h.span, err.Error())
		r.endSpan(h.span)
		return nil, err
	}
	return h, nil
}

// StepResult waits for the result of a remote step started with StartStep. A long wait parks
// the workflow until the result is recorded. A step that failed after its retries is a
// *StepError.
func StepResult[O any](ctx Context, h *StepHandle) (O, error) {
	r := ctx.run()
	if err := r.droppedErr(); err != nil {
		var zero O
		return zero, err
	}
	if v, ok, err := replay[O](r.hist, h.step, h.name); ok {
		return v, err
	}
	since := nowMs()
	for {
		if err := r.stopped(); err != nil {
			var zero O
			return zero, err
		}
		res, err := r.call(h)
		if err != nil {
			var zero O
			return zero, err
		}
		if res.GetOutcome() == pb.RecvResult_OUTCOME_DELIVERED {
			h.delivered(r, res)
			return stepOutcome[O](h.name, entry{output: res.GetOutput(), failure: res.GetFailure()})
		}
		if err := r.waitOrPark(since, h.step, func(p *pb.Park) { p.On = &pb.Park_Step{Step: h.step} }); err != nil {
			var zero O
			return zero, err
		}
	}
}

// delivered ends the call's span with the attempts the step took, failed when it failed.
func (h *StepHandle) delivered(r *run, res *pb.CallResult) {
	if h.span == nil {
		return
	}
	if n := res.GetAttempts(); n > 0 {
		h.span.SetAttributes(attrStepAttempt.Int64(int64(n)))
	}
	if f := res.GetFailure(); f != nil {
		failSpan(h.span, f.GetMessage())
	}
	r.endSpan(h.span)
}

// call makes the call, or asks again for its result: a position is called once however often
// it is sent. Each carries the call's span; the server keeps the first it gets.
func (r *run) call(h *StepHandle) (*pb.CallResult, error) {
	req := &pb.CallStep{WorkflowId: r.id, Epoch: r.epoch, StepId: h.step, StepName: h.name, Input: h.input, TraceContext: h.trace}
	if p := h.cfg.retry; p != nil {
		n := p.normalized()
		req.Retry = &pb.RetryPolicy{
			MaxAttempts:        n.MaxAttempts,
			InitialInterval:    durationpb.New(n.InitialInterval),
			BackoffCoefficient: n.Backoff,
			MaxInterval:        durationpb.New(n.MaxInterval),
		}
	}
	if h.cfg.timeout > 0 {
		req.Timeout = durationpb.New(h.cfg.timeout)
	}
	msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_CallStep{CallStep: req}}
	if err := r.conn.limits.admit("the step's input", h.input, msg); err != nil {
		return nil, err
	}
	reply, err := r.request(msg)
	if err != nil {
		return nil, err
	}
	return reply.GetCallResult(), r.expect(reply, func(x *pb.Reply) bool { return x.GetCallResult() != nil })
}

// WaitFirst waits until the first of targets finishes and returns its index. The winner is
// recorded, so a replay takes the same branch even if others have finished since. Read its
// result with StepResult or AwaitChild.
func WaitFirst(ctx Context, targets ...Awaitable) (int, error) {
	return waitSeveral(ctx.run(), targets, false)
}

// WaitAll waits until every one of targets has finished. Recorded like WaitFirst.
func WaitAll(ctx Context, targets ...Awaitable) error {
	_, err := waitSeveral(ctx.run(), targets, true)
	return err
}

func waitSeveral(r *run, targets []Awaitable, all bool) (int, error) {
	step, err := r.take(1)
	if err != nil {
		return 0, err
	}
	name := selectStep
	if all {
		name = waitAllStep
	}
	rec, ok, err := r.hist.builtin(step, name)
	if err != nil || ok {
		return field[int](rec.fields, "index"), err
	}
	if len(targets) == 0 {
		return 0, errors.New("waymark: nothing to wait for")
	}
	req := &pb.Select{WorkflowId: r.id, Epoch: r.epoch, StepId: step, All: all}
	for _, t := range targets {
		req.Targets = append(req.Targets, t.waitTarget())
	}
	span := r.startWait("select", step)
	defer r.endSpan(span)
	for {
		if err := r.stopped(); err != nil {
			return 0, err
		}
		reply, err := r.request(&pb.WorkerMessage{Kind: &pb.WorkerMessage_Select{Select: req}})
		if err != nil {
			return 0, err
		}
		if err := r.expect(reply, func(x *pb.Reply) bool { return x.GetSelected() != nil }); err != nil {
			return 0, err
		}
		if s := reply.GetSelected(); s.GetOutcome() == pb.RecvResult_OUTCOME_DELIVERED {
			return int(s.GetIndex()), nil
		}
		if err := r.waitUntil(forever, 0); err != nil {
			return 0, err
		}
	}
}
