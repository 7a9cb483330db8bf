package waymark

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// The heartbeat lists the runs the worker holds, and counts the dispatches it took off the
// stream; a run leaves the list only once it has ended.
func TestHeartbeatsListHeldRuns(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	release := make(chan struct{})
	RegisterWorkflow(w, "held", func(ctx Context, _ any) (any, error) {
		<-release
		return nil, nil
	})
	var hold sync.Once
	holdCompletion := make(chan uint64, 1)
	f := startFakeWith(t, w, 100*time.Millisecond, func(m *pb.WorkerMessage) *pb.Reply {
		// The completion's answer is held back: until it arrives the run is still held.
		if m.GetCompleteWorkflow() != nil {
			hold.Do(func() { holdCompletion <- m.GetRequestId() })
			return nil
		}
		return okReply(m)
	})
	f.dispatch("wf-5", "held")
	f.waitFor("a heartbeat listing the run", heartbeatIs([]string{"wf-5"}, 1))
	close(release)
	id := <-holdCompletion
	// Heartbeats built after the completion was sent, before its answer: still listed.
	n := len(f.messages())
	f.waitFor("a later heartbeat still listing the run", func(msgs []*pb.WorkerMessage) bool {
		return heartbeatIs([]string{"wf-5"}, 1)(msgs[n:])
	})
	f.reply(id, okReply(&pb.WorkerMessage{Kind: &pb.WorkerMessage_CompleteWorkflow{CompleteWorkflow: &pb.CompleteWorkflow{}}}))
	waitEnded(t, ended, "wf-5")
	n = len(f.messages())
	f.waitFor("a heartbeat listing nothing", func(msgs []*pb.WorkerMessage) bool {
		return heartbeatIs([]string{}, 1)(msgs[n:])
	})
}

// heartbeatIs: some heartbeat reports exactly these held ids and this dispatch count.
func heartbeatIs(held []string, dispatches uint64) func([]*pb.WorkerMessage) bool {
	return func(msgs []*pb.WorkerMessage) bool {
		for _, m := range msgs {
			hb := m.GetHeartbeat()
			if hb == nil || !hb.GetReportsHeld() || hb.GetDispatchesReceived() != dispatches {
				continue
			}
			got, _ := json.Marshal(hb.GetHeldWorkflowIds())
			want, _ := json.Marshal(held)
			if len(hb.GetHeldWorkflowIds()) == 0 && len(held) == 0 || string(got) == string(want) {
				return true
			}
		}
		return false
	}
}
