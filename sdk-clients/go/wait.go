package waymark

import (
	"math"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

func nowMs() int64 { return time.Now().UnixMilli() }

// forever is the wake time of a wait with no deadline of its own.
const forever = math.MaxInt64

func msDuration(ms int64) time.Duration {
	if ms <= 0 {
		return 0
	}
	if ms > math.MaxInt64/int64(time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// waitUntil waits until untilMs (by a clock that reads nowMs now), a wakeup, or the run's end.
func (r *run) waitUntil(untilMs, now int64) error {
	if r.offline {
		// A replay never waits: what the wait led to is recorded, or the history ends at the
		// request before it (every caller asks the server, or calls live, first).
		return r.stopped()
	}
	var timeout <-chan time.Time
	if untilMs != forever {
		t := time.NewTimer(msDuration(untilMs - now))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-r.wakeup:
	case <-r.Done():
	}
	return r.stopped()
}

// shouldPark: a wait until untilMs (by a clock now at now) is long enough to park for.
func (r *run) shouldPark(untilMs, now int64) bool {
	return r.parkAfter >= 0 && untilMs-now > r.parkAfter
}

// parkAt is when a wait that began at since has lasted long enough to park, or forever.
func (r *run) parkAt(since int64) int64 {
	if r.parkAfter < 0 {
		return forever
	}
	return since + r.parkAfter
}

// park asks the server to release this workflow until its wait resolves. When it did, the run
// stops with ErrParked and the error is returned; when the wait had already resolved, nil
// (the caller asks again).
func (r *run) park(step uint32, wakeAtMs int64, on func(*pb.Park)) error {
	req := &pb.Park{WorkflowId: r.id, Epoch: r.epoch, StepId: step, WakeAtMs: wakeAtMs}
	on(req)
	reply, err := r.request(&pb.WorkerMessage{Kind: &pb.WorkerMessage_Park{Park: req}})
	if err != nil {
		return err
	}
	if reply.GetParked().GetParked() {
		r.stop(ErrParked)
		return ErrParked
	}
	return nil
}

// waitOrPark waits for a wakeup on a wait with no deadline (children, remote steps, select):
// until a wakeup, or — once it has waited since `since` past the park threshold — parks.
func (r *run) waitOrPark(since int64, step uint32, on func(*pb.Park)) error {
	at := r.parkAt(since)
	if at != forever && nowMs() >= at {
		return r.park(step, forever, on)
	}
	return r.waitUntil(at, nowMs())
}

// after is the Unix-ms time d from now, saturating instead of overflowing.
func after(d time.Duration) int64 {
	now, ms := nowMs(), d.Milliseconds()
	if ms > forever-now {
		return forever
	}
	return now + max(ms, 0)
}
