package waymark

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// A workflow the server dispatches again while this worker still runs it (the server took it
// back, say after a database outage, and dispatched it here under a higher epoch) replaces the
// old run. Each dispatch spent a credit, and each is granted back exactly once: the replaced
// run's at once, even while its step goes on, and nothing more when it ends. The old run's end
// does not take the new run out of the heartbeat's list, and the old run sends nothing after
// it was replaced, even when its workflow goes on as if nothing had happened.
func TestDispatchedAgainGrantsEachCreditBackOnce(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{MaxConcurrentWorkflows: 4})
	ended := endedRuns(w)
	// The first run's step ignores its context and returns only when released; the second's
	// returns when released too.
	started := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	release := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	afterStep := make(chan error, 2)
	var invocation int
	RegisterWorkflow(w, "twice", func(ctx Context, _ any) (int, error) {
		i := invocation // runs one after the other: the second starts once the first is in its step
		invocation++
		_, err := Step(ctx, "block", func(context.Context) (int, error) {
			close(started[i])
			<-release[i]
			return i, nil
		})
		afterStep <- err
		// Going on regardless: a replaced run's further requests are not sent.
		_, _ = Step(ctx, "more", func(context.Context) (int, error) { return 0, nil })
		_, _ = Send(ctx, "elsewhere", "", "hi")
		return i, nil
	})
	f := startFakeWith(t, w, 20*time.Millisecond, okReply)
	dispatch := func(epoch uint64) {
		f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_DispatchWorkflow{DispatchWorkflow: &pb.DispatchWorkflow{
			WorkflowId: "wf-r", WorkflowName: "twice", Epoch: epoch,
		}}})
	}

	dispatch(1)
	<-started[0]
	dispatch(2)
	<-started[1]
	// The replaced run's credit is back (granted before the new run started) while its step
	// still runs.
	if got := creditsBack(f.messages()); got != 1 {
		t.Fatalf("the run dispatched again is replaced, %d credits granted back; want 1", got)
	}

	close(release[0])
	if err := <-afterStep; !errors.Is(err, ErrFenced) {
		t.Fatalf("the replaced run's step returned %v, want ErrFenced", err)
	}
	waitEnded(t, ended, "wf-r")
	// The old run has ended: the new one is still held, and listed.
	n := len(f.messages())
	f.waitFor("a heartbeat listing the new run after the old one ended", func(msgs []*pb.WorkerMessage) bool {
		return heartbeatIs([]string{"wf-r"}, 2)(msgs[n:])
	})
	if got := creditsBack(f.messages()); got != 1 {
		t.Fatalf("after the replaced run ended, %d credits granted back; want 1", got)
	}

	close(release[1])
	if err := <-afterStep; err != nil {
		t.Fatalf("the new run's step returned %v", err)
	}
	waitEnded(t, ended, "wf-r")
	msgs := f.messages()
	if got := creditsBack(msgs); got != 2 {
		t.Fatalf("two dispatches, %d credits granted back; want 2", got)
	}
	done := completions(msgs)
	if len(done) != 1 || done[0].GetEpoch() != 2 {
		t.Fatalf("want one completion, at epoch 2; got %v", done)
	}
	for _, m := range msgs {
		if e, ok := epochOf(m); ok && e != 2 {
			t.Fatalf("the replaced run sent %v", m)
		}
	}
	n = len(msgs)
	f.waitFor("a heartbeat listing nothing", func(msgs []*pb.WorkerMessage) bool {
		return heartbeatIs([]string{}, 2)(msgs[n:])
	})
}

// epochOf is the epoch a message for a workflow carries, if it carries one.
func epochOf(m *pb.WorkerMessage) (uint64, bool) {
	pm := m.ProtoReflect()
	oneof := pm.Descriptor().Oneofs().ByName("kind")
	fd := pm.WhichOneof(oneof)
	if fd == nil || fd.Message() == nil {
		return 0, false
	}
	inner := pm.Get(fd).Message()
	ef := inner.Descriptor().Fields().ByName(protoreflect.Name("epoch"))
	if ef == nil {
		return 0, false
	}
	return inner.Get(ef).Uint(), true
}
