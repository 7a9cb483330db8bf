package waymark

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// fakeServer is the server's end of one worker stream, in memory: a worker converses with it
// as with the real one, and the test decides every answer. It lets the tests put the worker in
// states a real server only reaches by accident (a database restart, a reply held back, a
// stream cut mid-request) and look at exactly what the worker sent.
type fakeServer struct {
	t        *testing.T
	toWorker chan *pb.ServerMessage
	broken   chan struct{}
	once     sync.Once
	// answer decides the reply to each request (nil: none for now; the test may reply later
	// with reply). Called in the order requests are sent, never concurrently.
	answer func(*pb.WorkerMessage) *pb.Reply
	// What the server welcomes the worker with: the heartbeat interval, the sizes it takes.
	welcome *pb.Welcome

	mu sync.Mutex
	// Everything the worker sent, and tried to send after the stream broke (refused then, as
	// a real stream would).
	received []*pb.WorkerMessage
	// Closed, and replaced, whenever a message arrives: what waitFor waits on.
	changed chan struct{}
}

// startFake runs w against a fake server until the test ends, once w is welcomed and has
// granted its credits. The server asks for no heartbeats the test would have to wade through.
func startFake(t *testing.T, w *Worker, answer func(*pb.WorkerMessage) *pb.Reply) *fakeServer {
	t.Helper()
	return startFakeWith(t, w, time.Hour, answer)
}

// startFakeWith is startFake with the heartbeat interval the welcome asks for.
func startFakeWith(t *testing.T, w *Worker, heartbeat time.Duration, answer func(*pb.WorkerMessage) *pb.Reply) *fakeServer {
	t.Helper()
	return startFakeWelcome(t, w, &pb.Welcome{HeartbeatIntervalMs: uint32(heartbeat.Milliseconds())}, answer)
}

// startFakeWelcome is startFake with the welcome the server sends.
func startFakeWelcome(t *testing.T, w *Worker, welcome *pb.Welcome, answer func(*pb.WorkerMessage) *pb.Reply) *fakeServer {
	t.Helper()
	f := &fakeServer{
		t:        t,
		toWorker: make(chan *pb.ServerMessage, 4096),
		broken:   make(chan struct{}),
		answer:   answer,
		welcome:  welcome,
		changed:  make(chan struct{}),
	}
	// As in Run: the session ends, then every goroutine it started has returned — none of
	// them may log to the test's log once the test is over.
	done := make(chan struct{})
	go func() {
		defer close(done)
		var g goroutines
		_, _ = w.converse(context.Background(), f, &g)
		g.wait(w.logger)
	}()
	t.Cleanup(func() {
		f.breakStream()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the worker's session and the goroutines it started did not end after the stream broke")
		}
	})
	f.waitFor("the worker's credits", func(msgs []*pb.WorkerMessage) bool {
		for _, m := range msgs {
			if m.GetCredit().GetWorkflows() > 0 {
				return true
			}
		}
		return false
	})
	return f
}

// fakeWorker is a worker for the fake server, logging to the test's log.
func fakeWorker(t *testing.T, opts WorkerOptions) *Worker {
	opts.Logger = slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return NewWorker(opts)
}

type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Send is the worker sending: kept (a copy, as the wire would), and answered.
func (f *fakeServer) Send(msg *pb.WorkerMessage) error {
	msg = proto.Clone(msg).(*pb.WorkerMessage)
	f.mu.Lock()
	f.received = append(f.received, msg)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	select {
	case <-f.broken:
		return io.EOF
	default:
	}

	switch {
	case msg.GetHello() != nil:
		welcome := proto.Clone(f.welcome).(*pb.Welcome)
		welcome.SessionId = "fake"
		f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_Welcome{Welcome: welcome}})
	case msg.GetRequestId() != 0 && f.answer != nil:
		if reply := f.answer(msg); reply != nil {
			f.reply(msg.GetRequestId(), reply)
		}
	}
	return nil
}

// Recv is the worker reading what the server sent, until the stream breaks.
func (f *fakeServer) Recv() (*pb.ServerMessage, error) {
	select {
	case m := <-f.toWorker:
		return m, nil
	case <-f.broken:
		return nil, io.EOF
	}
}

func (f *fakeServer) push(m *pb.ServerMessage) { f.toWorker <- m }

// reply answers request id.
func (f *fakeServer) reply(id uint64, r *pb.Reply) {
	r = proto.Clone(r).(*pb.Reply)
	r.RequestId = id
	f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_Reply{Reply: r}})
}

// dispatch hands the worker a workflow, as a first dispatch.
func (f *fakeServer) dispatch(id, name string) {
	f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_DispatchWorkflow{DispatchWorkflow: &pb.DispatchWorkflow{
		WorkflowId: id, WorkflowName: name, Epoch: 1,
	}}})
}

// breakStream cuts the stream: the worker's next read fails and its sends are refused.
func (f *fakeServer) breakStream() {
	f.once.Do(func() { close(f.broken) })
}

// messages is a copy of everything the worker sent so far.
func (f *fakeServer) messages() []*pb.WorkerMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.WorkerMessage(nil), f.received...)
}

// waitFor waits until what the worker sent satisfies cond, failing the test after a generous
// deadline. It wakes on every message, so it waits only as long as the condition takes.
func (f *fakeServer) waitFor(what string, cond func([]*pb.WorkerMessage) bool) []*pb.WorkerMessage {
	f.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		msgs, changed := append([]*pb.WorkerMessage(nil), f.received...), f.changed
		f.mu.Unlock()
		if cond(msgs) {
			return msgs
		}
		select {
		case <-changed:
		case <-deadline.C:
			f.t.Fatalf("timed out waiting for %s; the worker sent %v", what, msgs)
		}
	}
}

// Answers a fake server gives.

func unavailableReply() *pb.Reply {
	return &pb.Reply{Result: &pb.Reply_Error{Error: &pb.ReplyError{Code: 14, Reason: "STORE_UNAVAILABLE", Message: "the database is restarting"}}}
}

// okReply is the answer a healthy server gives a request that goes through.
func okReply(msg *pb.WorkerMessage) *pb.Reply {
	switch k := msg.GetKind().(type) {
	case *pb.WorkerMessage_RecordStep, *pb.WorkerMessage_SetEvent:
		return &pb.Reply{Result: &pb.Reply_StepRecorded{StepRecorded: &pb.StepRecorded{}}}
	case *pb.WorkerMessage_CompleteWorkflow:
		c := &pb.WorkflowCompleted{Status: pb.WorkflowStatus_WORKFLOW_STATUS_SUCCESS, Output: k.CompleteWorkflow.GetOutput()}
		if f := k.CompleteWorkflow.GetFailure(); f != nil {
			c.Status, c.Failure = pb.WorkflowStatus_WORKFLOW_STATUS_ERROR, f
		}
		return &pb.Reply{Result: &pb.Reply_WorkflowCompleted{WorkflowCompleted: c}}
	case *pb.WorkerMessage_SendMessage:
		return &pb.Reply{Result: &pb.Reply_MessageSent{MessageSent: &pb.MessageSent{MessageId: "m-1"}}}
	}
	return &pb.Reply{Result: &pb.Reply_Error{Error: &pb.ReplyError{Code: 12, Reason: "UNIMPLEMENTED", Message: "the fake server does not answer this"}}}
}

// Predicates on what the worker sent.

// kindOf names a request's kind, for tests that answer by kind.
func kindOf(m *pb.WorkerMessage) string {
	switch m.GetKind().(type) {
	case *pb.WorkerMessage_RecordStep:
		return "record"
	case *pb.WorkerMessage_SendMessage:
		return "send"
	case *pb.WorkerMessage_CompleteWorkflow:
		return "complete"
	}
	return "other"
}

func completions(msgs []*pb.WorkerMessage) []*pb.CompleteWorkflow {
	var out []*pb.CompleteWorkflow
	for _, m := range msgs {
		if c := m.GetCompleteWorkflow(); c != nil {
			out = append(out, c)
		}
	}
	return out
}

func records(msgs []*pb.WorkerMessage) []*pb.RecordStep {
	var out []*pb.RecordStep
	for _, m := range msgs {
		if r := m.GetRecordStep(); r != nil {
			out = append(out, r)
		}
	}
	return out
}

// creditsBack counts the single credits granted back as runs leave the worker.
func creditsBack(msgs []*pb.WorkerMessage) int {
	n := 0
	for _, m := range msgs {
		if c := m.GetCredit(); c != nil && c.GetWorkflows() == 1 {
			n++
		}
	}
	return n
}

// requests are the messages that expect a reply.
func requests(msgs []*pb.WorkerMessage) []*pb.WorkerMessage {
	var out []*pb.WorkerMessage
	for _, m := range msgs {
		if m.GetRequestId() != 0 {
			out = append(out, m)
		}
	}
	return out
}
