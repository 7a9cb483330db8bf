package waymark

import (
	"context"
	"errors"
	"fmt"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// A replay (Replayer) is a run marked offline: every primitive answers from the history as it
// does on any replay, and where it would go live instead — ask the server, run a step's
// function, draw the time or a UUID, record a patch's marker, sleep on — it calls live, which
// ends the run there. Two checks cover every primitive: request, which every request to the
// server goes through, and live calls in the primitives that go live without a request (Step,
// Now, UUID and Patched, a sleep not over yet). waitUntil never waits offline: what a wait led
// to is recorded, or the history ends at the request before it.

// historyEnded is ErrHistoryEnded at a position: the replay is Suspended there.
type historyEnded struct{ step uint32 }

func (e *historyEnded) Error() string {
	return fmt.Sprintf("%v at step %d", ErrHistoryEnded, e.step)
}

func (e *historyEnded) Is(target error) bool { return target == ErrHistoryEnded }

// errOffline: a replay's stream takes nothing.
var errOffline = errors.New("waymark: a replay sends nothing")

// offlineStream is the stream under a replay's run. Were a request to get past the offline
// checks, it would fail at once (the run is dropped, and the replay fails with ErrDropped, a
// bug to see) rather than wait for an answer that never comes.
type offlineStream struct{ sent func(*pb.WorkerMessage) }

func (s offlineStream) Send(m *pb.WorkerMessage) error {
	if s.sent != nil {
		s.sent(m)
	}
	return errOffline
}

func (offlineStream) Recv() (*pb.ServerMessage, error) { return nil, errOffline }

// offlineRun is a run that replays d's steps and goes no further. It has no session: nothing
// it does reaches one, and it never parks (a replay never waits, so has nothing to park for).
func (p *Replayer) offlineRun(ctx context.Context, d *pb.DispatchWorkflow) *run {
	ctx, cancel := context.WithCancelCause(ctx)
	_, span := noTracer.Start(ctx, "replay")
	return &run{
		Context:          ctx,
		cancel:           cancel,
		id:               d.GetWorkflowId(),
		name:             d.GetWorkflowName(),
		epoch:            d.GetEpoch(),
		recoveryAttempts: d.GetRecoveryAttempts(),
		hist:             newHistory(d.GetWorkflowId(), d.GetSteps()),
		// The default sizes: what a live run checks against until the server says otherwise.
		conn:      newConn(offlineStream{sent: p.sent}),
		parkAfter: -1,
		retryFor:  -1,
		hooks:     &testHooks{},
		// A replay opens no span: nothing it does is done now.
		span:      span,
		tracer:    noTracer,
		logger:    p.w.logger.With("workflow_id", d.GetWorkflowId(), "workflow", d.GetWorkflowName(), "replay", true),
		wakeup:    make(chan struct{}, 1),
		delivered: map[uint32]*pb.Payload{},
		offline:   true,
	}
}

// live is called when the call at step is about to go live. Offline, the history ends there:
// the run stops with that as its cause — as a cancel stops it, so that code which swallows the
// error still ends here — and the error is returned (the first position it ended at, should
// the code have swallowed an earlier one and called on).
func (r *run) live(step uint32) error {
	if !r.offline {
		return nil
	}
	r.stop(&historyEnded{step: step})
	return r.stopped()
}

// stepOf is the step position a request of a run is for: every request that carries one
// names it step_id. Read by reflection so that a request kind added later is covered too.
func stepOf(msg *pb.WorkerMessage) uint32 {
	m := msg.ProtoReflect()
	kind := m.WhichOneof(m.Descriptor().Oneofs().ByName("kind"))
	if kind == nil || kind.Message() == nil {
		return 0
	}
	inner := m.Get(kind).Message()
	if f := inner.Descriptor().Fields().ByName("step_id"); f != nil {
		return uint32(inner.Get(f).Uint())
	}
	return 0
}
