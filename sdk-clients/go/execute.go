package waymark

import (
	"errors"
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc/codes"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

func codeOf(n int32) codes.Code { return codes.Code(uint32(n)) }

// execute runs a dispatched workflow's function and sends its outcome — unless the run was
// stopped (cancelled, parked, fenced) or dropped meanwhile: then nothing is sent for it,
// whatever the function returned.
func (s *session) execute(r *run, d *pb.DispatchWorkflow) {
	defer s.finished(r)
	// Before the credit goes back: what the run opened ends with it, then the run's span.
	defer r.span.End()
	defer r.spans.endAll()
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
	// The completion carries the records still held back, once those that other goroutines
	// of the workflow have in flight are durable; one of those may have ended the run.
	held := r.lastRecords()
	if stop := r.stopped(); stop != nil {
		r.logger.Info("workflow run stopped", "reason", stop)
		return
	}
	if f := r.complete(out, err, held); f != nil {
		failSpan(r.span, f.GetMessage())
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
