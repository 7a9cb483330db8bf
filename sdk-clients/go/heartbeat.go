package waymark

import (
	"errors"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// heartbeat renews the worker's lease at the interval the server asked for, until the session
// ends.
func (s *session) heartbeat(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			_ = s.conn.send(s.heartbeatMessage())
		}
	}
}

// heartbeatMessage says which workflows this worker holds, and how many dispatches it has
// taken off the stream: the server puts back in its queue at once a workflow it dispatched
// here (before that count) that the list leaves out — one this worker lost.
func (s *session) heartbeatMessage() *pb.WorkerMessage {
	s.mu.Lock()
	hb := &pb.Heartbeat{
		ReportsHeld:        true,
		HeldWorkflowIds:    make([]string, 0, len(s.running)),
		DispatchesReceived: s.dispatches,
	}
	for id := range s.running {
		hb.HeldWorkflowIds = append(hb.HeldWorkflowIds, id)
	}
	s.mu.Unlock()
	msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_Heartbeat{Heartbeat: hb}}
	if len(hb.HeldWorkflowIds) > maxHeldListed || s.conn.limits.fits(msg) != nil {
		// A list the server would not take: the heartbeat still renews the lease, and says
		// nothing of what is held (the server then reconciles nothing).
		s.w.logger.Warn("too many workflows held to list them in a heartbeat", "held", len(hb.HeldWorkflowIds))
		hb.ReportsHeld, hb.HeldWorkflowIds = false, nil
	}
	return msg
}

// maxHeldListed is the most workflow ids a heartbeat may list.
const maxHeldListed = 100_000

// errLost is why a run a test made the worker lose stopped.
var errLost = errors.New("lost by the worker (a test's doing)")

// lose makes the worker forget a run without a word to the server, as a bug or a lost reply
// might: the run is dropped (it sends nothing more, not even its credit) and leaves the
// heartbeat's list at once. Only the package's tests call it, to show the server takes such a
// workflow back.
func (s *session) lose(r *run) {
	// Out of the list first: a run no longer held grants no credit when it ends (see finished).
	s.mu.Lock()
	if s.running[r.id] == r {
		delete(s.running, r.id)
	}
	s.mu.Unlock()
	r.drop(errLost)
}
