package waymark

import (
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Sleep sleeps durably: the wake time is recorded as a step, so a workflow recovered
// mid-sleep sleeps only what is left. A sleep longer than the worker's park threshold parks the
// workflow (Sleep returns ErrParked; return it) and the server dispatches it again at the wake
// time. Cancelling the workflow ends the sleep.
func Sleep(ctx Context, d time.Duration) error {
	r := ctx.run()
	step, err := r.take(1)
	if err != nil {
		return err
	}
	rec, ok, err := r.hist.builtin(step, sleepStep)
	if err != nil {
		return err
	}
	wakeAt := field[int64](rec.fields, "wake_at_ms")
	if !ok {
		if err := r.stopped(); err != nil {
			return err
		}
		wakeAt = after(d)
		if err := r.record(step, sleepStep, mustPayload(map[string]any{"wake_at_ms": wakeAt})); err != nil {
			return err
		}
	}
	if nowMs() < wakeAt {
		// Waiting now, even for a sleep the history records (a recovery mid-sleep).
		span := r.startWait("sleep", step)
		defer r.endSpan(span)
	}
	if r.shouldPark(wakeAt, nowMs()) {
		if err := r.park(step, wakeAt, func(p *pb.Park) { p.On = &pb.Park_Timer{Timer: true} }); err != nil {
			return err
		}
	}
	for nowMs() < wakeAt {
		// A replay of a sleep still running ends where the live run sleeps.
		if err := r.live(step); err != nil {
			return err
		}
		if err := r.waitUntil(wakeAt, nowMs()); err != nil {
			return err
		}
	}
	return nil
}
