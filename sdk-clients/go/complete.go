package waymark

import (
	"google.golang.org/protobuf/proto"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// complete sends the workflow's outcome — its output, the next run's input when err is a
// ContinueAsNew, or the failure err — with the step records still held back.
//
// An output (or a next run's input) larger than the server takes is not sent: the workflow
// fails with kind PAYLOAD_TOO_LARGE instead (running it again would return the same value). A completion that
// with the held records would make a message larger than the server takes goes without them:
// they are sent on their own first, and the completion only once they are all durable, as it
// would be were it carrying them.
//
// It returns the failure it sent, nil when the workflow succeeded or continued as new.
func (r *run) complete(out *pb.Payload, err error, held []*pb.RecordStep) *pb.Failure {
	lim := r.conn.limits
	req := &pb.CompleteWorkflow{WorkflowId: r.id, Epoch: r.epoch}
	msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_CompleteWorkflow{CompleteWorkflow: req}}
	next, continued := continuedAsNew(err)
	switch {
	case continued:
		req.Outcome = &pb.CompleteWorkflow_ContinueAsNew{ContinueAsNew: &pb.ContinueAsNew{Input: next}}
		if big := lim.admit("the next run's input", next, msg); big != nil {
			r.logger.Warn("next run's input too large to send; the workflow fails", "error", big.Message)
			req.Outcome = &pb.CompleteWorkflow_Failure{Failure: lim.failure(reasonPayloadTooLarge, big.Message)}
		}
	case err != nil:
		f := failureOf(err)
		req.Outcome = &pb.CompleteWorkflow_Failure{Failure: lim.failure(f.Kind, f.Message)}
	default:
		req.Outcome = &pb.CompleteWorkflow_Output{Output: out}
		if big := lim.admit("the workflow's output", out, msg); big != nil {
			r.logger.Warn("workflow output too large to send; the workflow fails", "error", big.Message)
			req.Outcome = &pb.CompleteWorkflow_Failure{Failure: lim.failure(reasonPayloadTooLarge, big.Message)}
		}
	}
	if len(held) > 0 {
		req.Steps = held
		if proto.Size(msg)+requestIDBytes > lim.message {
			req.Steps = nil
			if err := r.send(held); err != nil {
				// As when the completion carries them: a refusal of one refuses it all.
				r.logger.Info("held step records refused; the completion is not sent", "error", err)
				return req.GetFailure()
			}
		}
	}
	reply, rerr := r.exchange(msg)
	switch {
	case rerr != nil:
		// Dropped: the server dispatches the workflow again, and a repeated completion is
		// adopted.
		r.logger.Info("completion not acknowledged; the run is dropped", "error", rerr)
	case reply.GetError() != nil:
		r.logger.Info("completion refused", "reason", reply.GetError().GetReason(), "message", reply.GetError().GetMessage())
	case reply.GetWorkflowCompleted().GetAdopted():
		r.logger.Info("workflow had already finished; its recorded outcome stands")
	default:
		r.logger.Debug("workflow completed", "failed", req.GetFailure() != nil, "continued_as_new", req.GetContinueAsNew() != nil)
	}
	return req.GetFailure()
}
