package waymark

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// session is one stream to the server: hello, credits, heartbeats, dispatches. When it ends,
// every workflow it was running is dropped (ErrDropped, wrapping ErrDisconnected); the server
// hands them out again, to this worker when it reconnects or to another.
type session struct {
	w      *Worker
	conn   *conn
	ctx    context.Context
	cancel context.CancelCauseFunc
	// Where the session starts its goroutines: its Run's, which waits for them all.
	g *goroutines

	mu sync.Mutex
	// The runs this worker holds, by workflow id: from the moment their dispatch is taken off
	// the stream until their goroutine ends. Heartbeats list them.
	running map[string]*run
	// DispatchWorkflow messages taken off this stream, counted under mu with the insert into
	// running, so a heartbeat never counts a dispatch it does not list.
	dispatches uint64
}

// session runs one stream until it breaks; welcomed says whether the server accepted it. The
// goroutines it starts go on g, and may outlive it: a run dropped when the stream broke ends
// once its function sees its context end, while the worker reconnects.
func (w *Worker) session(ctx context.Context, cc *grpc.ClientConn, g *goroutines) (welcomed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// gRPC's own limits must never be what refuses a message: the SDK keeps what it sends
	// within the size the server's Welcome gives (which comes too late to set them from), and
	// a dispatch with a long history may be far larger than gRPC's default 4 MiB.
	stream, err := pb.NewWorkerServiceClient(cc).Connect(ctx,
		grpc.MaxCallSendMsgSize(math.MaxInt32), grpc.MaxCallRecvMsgSize(math.MaxInt32))
	if err != nil {
		return false, rpcError(err)
	}
	return w.converse(ctx, stream, g)
}

// converse holds the conversation on an open stream: hello and welcome, credits, then the
// server's messages until the stream breaks.
func (w *Worker) converse(ctx context.Context, stream workerStream, g *goroutines) (welcomed bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &session{w: w, conn: newConn(stream), ctx: ctx, cancel: cancel, g: g, running: map[string]*run{}}
	defer s.end()
	if err := s.conn.send(w.hello()); err != nil {
		_, err = stream.Recv()
		return false, rpcError(err)
	}
	first, err := stream.Recv()
	if err != nil {
		return false, rpcError(err)
	}
	welcome := first.GetWelcome()
	if welcome == nil {
		return false, errors.New("waymark: the server did not welcome this worker")
	}
	// Before the first credit: nothing for a workflow is sent until then.
	s.conn.limits = limitsOf(welcome)
	w.logger.Info("connected to Waymark", "session", welcome.GetSessionId(), "server_version", welcome.GetServerVersion(),
		"max_payload_bytes", s.conn.limits.payload, "max_message_bytes", s.conn.limits.message)
	if w.hooks.welcomed != nil {
		w.hooks.welcomed()
	}

	var stepCredits uint32
	if w.hasSteps() {
		stepCredits = w.opts.MaxConcurrentSteps
	}
	_ = s.conn.send(&pb.WorkerMessage{Kind: &pb.WorkerMessage_Credit{Credit: &pb.Credit{Workflows: w.opts.MaxConcurrentWorkflows, Steps: stepCredits}}})
	every := time.Duration(max(welcome.GetHeartbeatIntervalMs(), 100)) * time.Millisecond
	s.g.start(nil, func() { s.heartbeat(every) })

	for {
		msg, err := stream.Recv()
		if err != nil {
			return true, rpcError(err)
		}
		s.handle(msg)
	}
}

// end closes the session: every run still held is dropped (none of them can be answered any
// more), then the stream's waiters are released and the session's context ends.
func (s *session) end() {
	s.mu.Lock()
	runs := slices.Collect(maps.Values(s.running))
	s.mu.Unlock()
	for _, r := range runs {
		r.drop(ErrDisconnected)
	}
	s.conn.close()
	s.cancel(ErrDisconnected)
}

func (w *Worker) hello() *pb.WorkerMessage {
	w.mu.RLock()
	defer w.mu.RUnlock()
	h := &pb.Hello{
		WorkerId:   w.opts.WorkerID,
		AppName:    w.opts.AppName,
		AppVersion: w.opts.AppVersion,
		Queues:     w.opts.Queues,
		Sdk:        sdkName,
	}
	for name := range w.workflows {
		h.WorkflowNames = append(h.WorkflowNames, name)
	}
	for name := range w.steps {
		h.StepNames = append(h.StepNames, name)
	}
	return &pb.WorkerMessage{Kind: &pb.WorkerMessage_Hello{Hello: h}}
}

func (s *session) handle(msg *pb.ServerMessage) {
	switch k := msg.GetKind().(type) {
	case *pb.ServerMessage_Reply:
		s.conn.resolve(k.Reply)
	case *pb.ServerMessage_DispatchWorkflow:
		s.dispatch(k.DispatchWorkflow)
	case *pb.ServerMessage_Cancel:
		if r := s.get(k.Cancel.GetWorkflowId()); r != nil {
			r.stop(ErrCancelled)
		}
	case *pb.ServerMessage_Wakeup:
		if r := s.get(k.Wakeup.GetWorkflowId()); r != nil {
			r.wake(k.Wakeup)
		}
	case *pb.ServerMessage_DispatchStep:
		s.g.start(&s.g.attempts, func() { s.serveStep(k.DispatchStep) })
	case *pb.ServerMessage_Drain:
		s.w.logger.Info("server is draining; will reconnect when it closes the stream")
	}
}

func (s *session) get(workflowID string) *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[workflowID]
}

// dispatch runs a workflow on its own goroutine. A second dispatch of a workflow still running
// here (the server took it back meanwhile, say after a database outage, and dispatched it again
// under a higher epoch) replaces the first, which stops without writing (its epoch is stale).
// Each dispatch spent one of this worker's credits, and the replaced run's is granted back here:
// it leaves the worker's books now, and its end grants nothing (see finished). Were it never
// granted back, every dispatch again would shrink this worker's room for good.
func (s *session) dispatch(d *pb.DispatchWorkflow) {
	r := newRun(s, d)
	s.mu.Lock()
	s.dispatches++
	old := s.running[d.GetWorkflowId()]
	if old != nil {
		old.stop(fmt.Errorf("%w: dispatched again", ErrFenced))
	}
	s.running[d.GetWorkflowId()] = r
	s.mu.Unlock()
	if old != nil {
		s.grantWorkflowCredit()
	}
	s.g.start(&s.g.runs, func() { s.execute(r, d) })
}

// finished forgets a run and grants its credit back, only when the run is still the one this
// worker holds for its workflow: a later dispatch that replaced it granted its credit back
// then (and the newer run stays held), and a run lost without a word (see lose) grants none.
// So each dispatch received is granted back exactly once.
func (s *session) finished(r *run) {
	s.mu.Lock()
	held := s.running[r.id] == r
	if held {
		delete(s.running, r.id)
	}
	s.mu.Unlock()
	if held {
		s.grantWorkflowCredit()
	}
	if s.w.hooks.runEnded != nil {
		s.w.hooks.runEnded(r.id)
	}
}

// grantWorkflowCredit gives the server room for one more workflow.
func (s *session) grantWorkflowCredit() {
	_ = s.conn.send(&pb.WorkerMessage{Kind: &pb.WorkerMessage_Credit{Credit: &pb.Credit{Workflows: 1}}})
}
