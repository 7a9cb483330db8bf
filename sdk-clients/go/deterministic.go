package waymark

import (
	"crypto/rand"
	"fmt"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// A workflow is replayed from the start after a crash, a park or a resume, and must take the
// same decisions each time. time.Now and math/rand (or crypto/rand, or uuid libraries) return
// something else on every run, so workflow code that branches on them, or passes them to a
// step, can call different steps on replay than it did live. Now and UUID read the clock and
// draw a UUID once, record what they got as a built-in step, and return the recorded value on
// every replay.

// Now is the current time, read once: live, the worker's clock, recorded as a step
// (waymark.now); on replay, the recorded time. Use it instead of time.Now in workflow code,
// which reads another time on every replay. It takes one step position in call order, like
// Step. The time has millisecond precision, in UTC, and no monotonic reading — live and on
// replay alike, so the workflow cannot tell them apart. Steps' own functions may call time.Now
// freely: their results are recorded.
//
// The record is held back and goes with the workflow's next step, request or completion, as a
// step's does; a crash before then reads the clock again on replay, which nothing recorded can
// have depended on. Where the history records another step at this position, Now returns an
// error wrapping ErrNonDeterminism. A workflow cancelled, parked or taken over gets the cause,
// as from Step.
func Now(ctx Context) (time.Time, error) {
	return drawOnce(ctx, nowStep, (*history).recordedNow, func() (time.Time, *pb.Payload) {
		ms := nowMs()
		return time.UnixMilli(ms).UTC(), mustPayload(map[string]any{"now_ms": ms})
	})
}

// UUID is a random UUID, version 4, lowercase and hyphenated
// ("0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20"), drawn once: live, from crypto/rand, recorded as a
// step (waymark.uuid); on replay, the recorded one. Use it instead of drawing random ids in
// workflow code, which draws another on every replay — an id the workflow passes on (a key, an
// idempotency token) would change under it. It takes one step position in call order, and is
// recorded, replayed and stopped as Now is.
func UUID(ctx Context) (string, error) {
	return drawOnce(ctx, uuidStep, (*history).recordedUUID, func() (string, *pb.Payload) {
		id := newUUID()
		return id, mustPayload(map[string]any{"uuid": id})
	})
}

// drawOnce is Now's and UUID's one path: the value recorded at the call's position on
// replay; else, unless the run has stopped, a fresh one from draw, with its record held as a
// step's result is (see Step) — the same record, so no extra round trip.
func drawOnce[T any](ctx Context, name string, recorded func(*history, uint32) (T, bool, error), draw func() (T, *pb.Payload)) (T, error) {
	var zero T
	r := ctx.run()
	step, err := r.take(1)
	if err != nil {
		return zero, err
	}
	if v, ok, err := recorded(r.hist, step); ok {
		return v, err
	}
	// Offline, nothing is drawn: the history ends here.
	if err := r.live(step); err != nil {
		return zero, err
	}
	if err := r.stopped(); err != nil {
		return zero, err
	}
	v, out := draw()
	r.hold(r.stepRecord(step, name, out, nil, 1))
	return v, nil
}

// newUUID draws a random version 4 UUID (RFC 9562). The module has no UUID dependency and 16
// random bytes need none; crypto/rand.Read does not fail (it crashes the program instead).
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10 (RFC 9562)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
