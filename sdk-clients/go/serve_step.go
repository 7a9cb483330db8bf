package waymark

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// serveStep runs one attempt of a remote step registered here and reports its result, then
// grants its step credit back. An attempt still running at its deadline is abandoned: the
// server has failed it already and refuses a late result.
func (s *session) serveStep(d *pb.DispatchStep) {
	defer func() {
		_ = s.conn.send(&pb.WorkerMessage{Kind: &pb.WorkerMessage_Credit{Credit: &pb.Credit{Steps: 1}}})
	}()
	log := s.w.logger.With("workflow_id", d.GetWorkflowId(), "step", d.GetStepName(), "attempt", d.GetAttempt())
	// Under the calling span; ends once the result is sent.
	ctx, span := startServeSpan(s.ctx, s.w.tracer, d)
	defer span.End()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if dl := d.GetDeadline(); dl != nil {
		ctx, cancel = context.WithDeadline(ctx, dl.AsTime())
		defer cancel()
	}
	out, err := s.attempt(ctx, d)
	if ctx.Err() != nil {
		log.Info("step attempt abandoned: past its deadline or the stream ended", "error", err)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			failSpan(span, "the attempt ran past its deadline")
		}
		return
	}
	res := s.stepResult(d, out, err)
	if f := res.GetFailure(); f != nil {
		failSpan(span, f.GetMessage())
	}
	// Sent again while the server is unavailable, but not past the attempt's deadline: the
	// server fails the attempt then and would refuse the result.
	reply, err := s.conn.exchange(&pb.WorkerMessage{Kind: &pb.WorkerMessage_StepResult{StepResult: res}}, s.w.opts.RetryUnavailable, ctx.Done())
	switch {
	case err != nil:
		log.Info("step result not acknowledged; the server will retry the attempt", "error", err)
	case reply.GetError() != nil:
		log.Info("step result refused", "reason", reply.GetError().GetReason(), "message", reply.GetError().GetMessage())
	}
}

// stepResult is the result of an attempt as sent to the server. An output larger than the
// server takes fails the attempt with kind PAYLOAD_TOO_LARGE instead, as it would fail a local
// step; the caller's retry policy decides what next.
func (s *session) stepResult(d *pb.DispatchStep, out *pb.Payload, err error) *pb.StepResult {
	lim := s.conn.limits
	res := &pb.StepResult{WorkflowId: d.GetWorkflowId(), StepId: d.GetStepId(), Attempt: d.GetAttempt()}
	if err != nil {
		res.Outcome = &pb.StepResult_Failure{Failure: lim.failure(stepFailedKind, err.Error())}
		return res
	}
	res.Outcome = &pb.StepResult_Output{Output: out}
	if big := lim.admit("the step's output", out, &pb.WorkerMessage{Kind: &pb.WorkerMessage_StepResult{StepResult: res}}); big != nil {
		res.Outcome = &pb.StepResult_Failure{Failure: lim.failure(reasonPayloadTooLarge, big.Message)}
	}
	return res
}

// attempt runs the registered function; a panic fails the attempt instead of the worker.
func (s *session) attempt(ctx context.Context, d *pb.DispatchStep) (out *pb.Payload, err error) {
	fn := s.w.step(d.GetStepName())
	if fn == nil {
		return nil, fmt.Errorf("this worker has no step named %q", d.GetStepName())
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, errors.New(fmt.Sprint("step panicked: ", p))
		}
	}()
	return fn(ctx, d.GetInput())
}
