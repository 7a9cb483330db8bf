package waymark

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// run is one dispatch of a workflow: the state its steps and waits share. It is the Context
// the workflow function gets.
type run struct {
	context.Context
	cancel context.CancelCauseFunc

	id, name         string
	epoch            uint64
	recoveryAttempts uint32
	// The replay cursor: every primitive takes its positions and its recorded results there.
	hist      *history
	sess      *session
	conn      *conn
	parkAfter int64 // milliseconds; negative: never park
	// How long a request the server answers UNAVAILABLE is sent again before the run is
	// dropped; negative: not at all.
	retryFor time.Duration
	logger   *slog.Logger
	hooks    *testHooks
	// The run's span (`workflow <name>`), which its Context carries, and the tracer and the
	// open spans of what it does (see tracing.go).
	span   trace.Span
	tracer trace.Tracer
	spans  spans
	// Set, once, when the worker lets go of the run without finishing it: the error every
	// later operation returns (see drop).
	dropped atomic.Pointer[error]
	// Rung (without blocking; one pending ring is kept) when the server says a wait may be over.
	wakeup chan struct{}
	// Replaying offline (a Replayer): a call the history does not record ends the run with
	// ErrHistoryEnded instead of going live, and nothing waits (see offline.go).
	offline bool

	mu sync.Mutex
	// Step records held back until the workflow's next request, or its completion, which
	// carries them: nothing outside the workflow can depend on a step before then, so the last
	// steps of a run cost no round trip and no commit of their own.
	deferred []*pb.RecordStep
	// The last batch of held records a flush took: a later flush (or the completion) settles
	// only after it.
	lastBatch *recordBatch
	// Receives the server completed on its own (a send found them waiting) and pushed with
	// the wakeup, by step position.
	delivered map[uint32]*pb.Payload
}

func newRun(s *session, d *pb.DispatchWorkflow) *run {
	ctx, span := startWorkflowSpan(s.ctx, s.w.tracer, d)
	ctx, cancel := context.WithCancelCause(ctx)
	r := &run{
		Context:          ctx,
		cancel:           cancel,
		id:               d.GetWorkflowId(),
		name:             d.GetWorkflowName(),
		epoch:            d.GetEpoch(),
		recoveryAttempts: d.GetRecoveryAttempts(),
		hist:             newHistory(d.GetWorkflowId(), d.GetSteps()),
		sess:             s,
		conn:             s.conn,
		parkAfter:        parkAfterMs(s.w.opts.ParkAfter),
		retryFor:         s.w.opts.RetryUnavailable,
		hooks:            &s.w.hooks,
		span:             span,
		tracer:           s.w.tracer,
		logger:           s.w.logger.With("workflow_id", d.GetWorkflowId(), "workflow", d.GetWorkflowName()),
		wakeup:           make(chan struct{}, 1),
		delivered:        map[uint32]*pb.Payload{},
	}
	return r
}

// parkAfterMs is the park threshold in milliseconds, -1 for never (any negative duration,
// even one that rounds to 0 ms).
func parkAfterMs(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// take reserves n step positions. Positions are taken in call order, which is what makes a
// replay line up with its history: call steps from one goroutine, or start them together
// (StartStep, StartChild) and wait with WaitAll. A dropped run takes none: every operation of
// it fails with the drop's error, even one its history could answer.
func (r *run) take(n uint32) (uint32, error) {
	if err := r.droppedErr(); err != nil {
		return 0, err
	}
	return r.hist.take(n), nil
}

// stop ends the run with cause (ErrCancelled, ErrParked, ErrFenced): its context is cancelled,
// so its next step or wait returns the cause.
func (r *run) stop(cause error) {
	r.cancel(cause)
	r.ring()
}

// stopped is why the run must stop, or nil while it may go on.
func (r *run) stopped() error {
	if err := r.droppedErr(); err != nil {
		return err
	}
	if r.Err() == nil {
		return nil
	}
	cause := context.Cause(r)
	if isInterruption(cause) {
		return cause
	}
	// The worker itself is stopping (its Run context ended).
	return ErrDisconnected
}

func (r *run) ring() {
	select {
	case r.wakeup <- struct{}{}:
	default:
	}
}

func (r *run) wake(w *pb.Wakeup) {
	if rr := w.GetRecv(); rr != nil && rr.GetOutcome() == pb.RecvResult_OUTCOME_DELIVERED {
		r.mu.Lock()
		r.delivered[w.GetStepId()] = rr.GetMessage()
		r.mu.Unlock()
	}
	r.ring()
}

func (r *run) takeDelivered(step uint32) (*pb.Payload, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.delivered[step]
	delete(r.delivered, step)
	return p, ok
}

// request sends a request for this workflow once every step record taken before it is
// durable, and waits for its answer. Offline, the history ends at the request's position:
// every request goes through here, so this one check keeps a replay off the wire.
func (r *run) request(msg *pb.WorkerMessage) (*pb.Reply, error) {
	if r.offline {
		// Only then: stepOf reads the position by reflection, which a live request need not pay.
		return nil, r.live(stepOf(msg))
	}
	if err := r.flush(); err != nil {
		return nil, err
	}
	reply, err := r.exchange(msg)
	if err != nil {
		return nil, err
	}
	return reply, r.expect(reply, func(*pb.Reply) bool { return true })
}

// expect turns a refused request into the error the workflow sees, and a reply of the wrong
// kind into a protocol error.
func (r *run) expect(reply *pb.Reply, ok func(*pb.Reply) bool) error {
	if e := reply.GetError(); e != nil {
		return r.refused(e)
	}
	if !ok(reply) {
		return fmt.Errorf("waymark: unexpected reply from the server: %T", reply.GetResult())
	}
	return nil
}

// refused is a refused write as the workflow sees it. A refusal that means this run is over
// also stops the run, so the workflow cannot go on (or complete) by ignoring the error.
func (r *run) refused(e *pb.ReplyError) error {
	switch e.GetReason() {
	case "STALE_EPOCH":
		err := fmt.Errorf("%w: %s", ErrFenced, e.GetMessage())
		r.stop(err)
		return err
	case "WORKFLOW_NOT_RUNNING":
		r.stop(ErrCancelled)
		return ErrCancelled
	case "NON_DETERMINISM":
		return fmt.Errorf("%w: %s", ErrNonDeterminism, e.GetMessage())
	}
	return &Error{Code: codeOf(e.GetCode()), Reason: e.GetReason(), Message: e.GetMessage()}
}

// record checkpoints a step now (not held back) and waits until it is durable.
func (r *run) record(step uint32, name string, out *pb.Payload) error {
	req := &pb.RecordStep{WorkflowId: r.id, Epoch: r.epoch, StepId: step, Name: name, Outcome: &pb.RecordStep_Output{Output: out}, Attempts: 1}
	reply, err := r.request(&pb.WorkerMessage{Kind: &pb.WorkerMessage_RecordStep{RecordStep: req}})
	if err != nil {
		return err
	}
	if reply.GetStepRecorded() == nil {
		return errors.New("waymark: unexpected reply to a step record")
	}
	return nil
}
