package waymark

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// session is one stream to the server: hello, credits, heartbeats, dispatches. When it ends,
// every workflow it was running is stopped (its context is cancelled with ErrDisconnected);
// the server hands them out again, to this worker when it reconnects or to another.
type session struct {
	w    *Worker
	conn *conn
	ctx  context.Context

	mu      sync.Mutex
	running map[string]*run
}

// session runs one stream until it breaks; welcomed says whether the server accepted it.
func (w *Worker) session(ctx context.Context, cc *grpc.ClientConn) (welcomed bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(ErrDisconnected)
	stream, err := pb.NewWorkerServiceClient(cc).Connect(ctx)
	if err != nil {
		return false, rpcError(err)
	}
	c := newConn(stream)
	defer c.close()
	if err := c.send(w.hello()); err != nil {
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
	w.logger.Info("connected to Waymark", "session", welcome.GetSessionId(), "server_version", welcome.GetServerVersion())

	s := &session{w: w, conn: c, ctx: ctx, running: map[string]*run{}}
	var stepCredits uint32
	if w.hasSteps() {
		stepCredits = w.opts.MaxConcurrentSteps
	}
	_ = c.send(&pb.WorkerMessage{Kind: &pb.WorkerMessage_Credit{Credit: &pb.Credit{Workflows: w.opts.MaxConcurrentWorkflows, Steps: stepCredits}}})
	go s.heartbeat(time.Duration(max(welcome.GetHeartbeatIntervalMs(), 100)) * time.Millisecond)

	for {
		msg, err := stream.Recv()
		if err != nil {
			return true, rpcError(err)
		}
		s.handle(msg)
	}
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

func (s *session) heartbeat(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			_ = s.conn.send(&pb.WorkerMessage{Kind: &pb.WorkerMessage_Heartbeat{Heartbeat: &pb.Heartbeat{}}})
		}
	}
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
		go s.serveStep(k.DispatchStep)
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
// here supersedes the first, which stops without writing (its epoch is stale).
func (s *session) dispatch(d *pb.DispatchWorkflow) {
	r := newRun(s, d)
	s.mu.Lock()
	if old := s.running[d.GetWorkflowId()]; old != nil {
		old.superseded.Store(true)
		old.stop(fmt.Errorf("%w: dispatched again", ErrFenced))
	}
	s.running[d.GetWorkflowId()] = r
	s.mu.Unlock()
	go s.execute(r, d)
}

// finished forgets a run and grants its credit back, unless a later dispatch replaced it.
func (s *session) finished(r *run) {
	s.mu.Lock()
	if s.running[r.id] == r {
		delete(s.running, r.id)
	}
	s.mu.Unlock()
	if !r.superseded.Load() {
		_ = s.conn.send(&pb.WorkerMessage{Kind: &pb.WorkerMessage_Credit{Credit: &pb.Credit{Workflows: 1}}})
	}
}
