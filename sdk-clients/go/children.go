package waymark

import (
	"encoding/json"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// ChildOptions are a child workflow's options; nil means none.
type ChildOptions struct {
	// ID of the child; derived from this workflow's id and the step position when empty.
	ID string
	// Queue of the child; this workflow's queue when empty.
	Queue string
	// Tags of the child over this workflow's, which it inherits: these replace or add keys.
	// The bounds of StartOptions.Tags apply: the server refuses a bad one, and StartChild
	// returns that refusal as an *Error with Reason INVALID_ARGUMENT (returned from the
	// workflow, it fails with that kind). Sent only when the child is started, not on a replay.
	Tags map[string]string
}

// StartChild starts child workflow name with input and returns its id. The child's row and
// this workflow's record of it are written together, so a replay re-joins the same child
// instead of starting another. An input larger than the server takes is not sent
// (ErrPayloadTooLarge).
func StartChild(ctx Context, name string, input any, opts *ChildOptions) (string, error) {
	r := ctx.run()
	step, err := r.take(1)
	if err != nil {
		return "", err
	}
	rec, ok, err := r.hist.builtin(step, startChildStep)
	if err != nil || ok {
		return field[string](rec.fields, "workflow_id"), err
	}
	if err := r.stopped(); err != nil {
		return "", err
	}
	payload, err := toPayload(input)
	if err != nil {
		return "", err
	}
	// Ends once the child is started; the child's dispatch carries it as its parent.
	sctx, span := r.startSpan("start child "+name, trace.SpanKindProducer, attrStepID.Int64(int64(step)))
	defer r.endSpan(span)
	req := &pb.StartChild{WorkflowId: r.id, Epoch: r.epoch, StepId: step, WorkflowName: name, Input: payload, TraceContext: traceContextOf(sctx)}
	if opts != nil {
		req.ChildWorkflowId, req.QueueName, req.Tags = opts.ID, opts.Queue, opts.Tags
	}
	msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_StartChild{StartChild: req}}
	if err := r.conn.limits.admit("the child's input", payload, msg); err != nil {
		failSpan(span, err.Error())
		return "", err
	}
	reply, err := r.request(msg)
	if err == nil {
		err = r.expect(reply, func(x *pb.Reply) bool { return x.GetChildStarted() != nil })
	}
	if err != nil {
		if !isInterruption(err) {
			failSpan(span, err.Error())
		}
		return "", err
	}
	return reply.GetChildStarted().GetChildWorkflowId(), nil
}

// AwaitChild waits for workflow childID (a child, or any workflow) to finish and returns its
// output as a T. Recorded: a replay gets the same result without waiting. A child that
// failed, was cancelled or dead-lettered is a *Failure of kind ChildFailed, ChildCancelled or
// ChildDeadLettered. A long wait parks the workflow until the child finishes.
func AwaitChild[T any](ctx Context, childID string) (T, error) {
	var zero T
	r := ctx.run()
	step, err := r.take(1)
	if err != nil {
		return zero, err
	}
	rec, ok, err := r.hist.builtin(step, awaitChildStep)
	if err != nil {
		return zero, err
	}
	fields := rec.fields
	since := nowMs()
	if !ok {
		span := r.startWait("child", step)
		defer r.endSpan(span)
	}
	for !ok {
		if err := r.stopped(); err != nil {
			return zero, err
		}
		reply, err := r.request(&pb.WorkerMessage{Kind: &pb.WorkerMessage_AwaitChild{AwaitChild: &pb.AwaitChild{
			WorkflowId: r.id, Epoch: r.epoch, StepId: step, ChildWorkflowId: childID,
		}}})
		if err != nil {
			return zero, err
		}
		if err := r.expect(reply, func(x *pb.Reply) bool { return x.GetChildResult() != nil }); err != nil {
			return zero, err
		}
		if res := reply.GetChildResult(); res.GetOutcome() == pb.RecvResult_OUTCOME_DELIVERED {
			fields, ok = childFields(res), true
			break
		}
		if err := r.waitOrPark(since, step, func(p *pb.Park) { p.On = &pb.Park_AwaitedWorkflowId{AwaitedWorkflowId: childID} }); err != nil {
			return zero, err
		}
	}
	return childResult[T](childID, fields)
}

// RunChild starts a child workflow and waits for its output.
func RunChild[T any](ctx Context, name string, input any, opts *ChildOptions) (T, error) {
	id, err := StartChild(ctx, name, input, opts)
	if err != nil {
		var zero T
		return zero, err
	}
	return AwaitChild[T](ctx, id)
}

// childFields is a child's outcome in the form await_child steps are recorded in.
func childFields(res *pb.ChildResult) map[string]json.RawMessage {
	m := map[string]json.RawMessage{}
	m["status"], _ = json.Marshal(statusFromWire(res.GetStatus()))
	if res.GetOutput() != nil {
		m["output"] = jsonOf(res.GetOutput())
	}
	if f := res.GetFailure(); f != nil {
		m["failure"], _ = json.Marshal(failureFromWire(f))
	}
	return m
}

func childResult[T any](childID string, fields map[string]json.RawMessage) (T, error) {
	var zero T
	switch Status(field[string](fields, "status")) {
	case StatusSuccess:
		return decodeJSON[T](fields["output"])
	case StatusCancelled:
		return zero, &Failure{Kind: "ChildCancelled", Message: fmt.Sprintf("child workflow %s was cancelled", childID)}
	case StatusDeadLettered:
		return zero, &Failure{Kind: "ChildDeadLettered", Message: fmt.Sprintf("child workflow %s was dead-lettered", childID)}
	}
	f := field[Failure](fields, "failure")
	return zero, &Failure{Kind: "ChildFailed", Message: fmt.Sprintf("child workflow %s failed: %s: %s", childID, f.Kind, f.Message)}
}
