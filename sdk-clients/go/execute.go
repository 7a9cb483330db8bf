package waymark

import (
	"errors"
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc/codes"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

func codeOf(n int32) codes.Code { return codes.Code(uint32(n)) }

// execute runs a dispatched workflow's function and sends its outcome.
func (s *session) execute(r *run, d *pb.DispatchWorkflow) {
	defer s.finished(r)
	out, err := s.call(r, d)
	if stop := r.stopped(); stop != nil {
		err = stop
	}
	if err != nil && isInterruption(err) {
		r.logger.Info("workflow run stopped", "reason", err)
		if errors.Is(err, ErrCancelled) {
			// The records the run held back go on their own, so no finished step runs again
			// if the workflow is resumed.
			_ = r.flush()
		}
		return
	}
	req := &pb.CompleteWorkflow{WorkflowId: r.id, Epoch: r.epoch, Steps: r.takeHeld()}
	if err != nil {
		f := failureOf(err)
		req.Outcome = &pb.CompleteWorkflow_Failure{Failure: &pb.Failure{Kind: f.Kind, Message: f.Message}}
	} else {
		req.Outcome = &pb.CompleteWorkflow_Output{Output: out}
	}
	reply, rerr := r.conn.request(&pb.WorkerMessage{Kind: &pb.WorkerMessage_CompleteWorkflow{CompleteWorkflow: req}})
	switch {
	case rerr != nil:
		// The stream broke: this run is abandoned and the server hands the workflow out again.
		r.logger.Info("stream broke before the completion was acknowledged")
	case reply.GetError() != nil:
		r.logger.Info("completion refused", "reason", reply.GetError().GetReason(), "message", reply.GetError().GetMessage())
	case reply.GetWorkflowCompleted().GetAdopted():
		r.logger.Info("workflow had already finished; its recorded outcome stands")
	default:
		r.logger.Debug("workflow completed", "failed", err != nil)
	}
}

// call runs the registered function; a panic fails the workflow (kind Panic) instead of the
// worker process.
func (s *session) call(r *run, d *pb.DispatchWorkflow) (out *pb.Payload, err error) {
	fn := s.w.workflow(d.GetWorkflowName())
	if fn == nil {
		return nil, &Failure{Kind: "UnknownWorkflow", Message: fmt.Sprintf("this worker has no workflow named %q", d.GetWorkflowName())}
	}
	defer func() {
		if p := recover(); p != nil {
			r.logger.Error("workflow panicked", "panic", p, "stack", string(debug.Stack()))
			out, err = nil, &Failure{Kind: "Panic", Message: fmt.Sprint(p)}
		}
	}()
	return fn(r, d.GetInput())
}
