package waymark

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Step names the SDKs record for durable waits and workflow-side requests; every SDK uses
// the same ones, so a workflow's history reads the same whichever language ran it.
const (
	sleepStep             = "waymark.sleep"
	recvDeadlineStep      = "waymark.recv.deadline"
	recvStep              = "waymark.recv"
	sendStep              = "waymark.send"
	setEventStep          = "waymark.set_event"
	getEventDeadlineStep  = "waymark.get_event.deadline"
	getEventStep          = "waymark.get_event"
	writeStreamStep       = "waymark.write_stream"
	closeStreamStep       = "waymark.close_stream"
	startChildStep        = "waymark.start_child"
	awaitChildStep        = "waymark.await_child"
	selectStep            = "waymark.select"
	waitAllStep           = "waymark.wait_all"
	nowStep               = "waymark.now"
	uuidStep              = "waymark.uuid"
	patchStep             = "waymark.patch"
	stepFailedKind        = "StepFailed"
	nonDeterminismMessage = "workflow %q called step %q at position %d, where its history records %q"
)

// history is a run's replay cursor: the steps earlier runs recorded, and the next position in
// call order. Every durable primitive takes its positions here and asks here what is recorded
// at them, so that position allocation, the non-determinism check and the decoding of the
// built-in shapes are the same for all of them — a replay lines up with its history only if
// every primitive counts and compares the same way.
type history struct {
	// Named in the non-determinism error.
	workflowID string
	// Steps recorded by earlier runs, by position. Filled once and only read after, so the
	// run's goroutines read it without a lock.
	steps map[uint32]*pb.Step

	mu   sync.Mutex
	next uint32
}

// newHistory is the cursor of a run dispatched with steps, at position 0. A position recorded
// twice keeps its last record.
func newHistory(workflowID string, steps []*pb.Step) *history {
	h := &history{workflowID: workflowID, steps: make(map[uint32]*pb.Step, len(steps))}
	for _, st := range steps {
		h.steps[st.GetStepId()] = st
	}
	return h
}

// take reserves n consecutive positions and returns the first. Positions go in call order,
// whichever goroutine calls: that order is all a replay has to line its calls up with what was
// recorded, so a workflow that starts primitives from several goroutines must start them in
// an order it repeats.
func (h *history) take(n uint32) uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.next
	h.next += n
	return first
}

// entry is the outcome recorded at a position: its failure when the step failed, else its
// output (nil reads as JSON null).
type entry struct {
	output  *pb.Payload
	failure *pb.Failure
}

// at is what the history records at position step, which the workflow now calls as name.
// ok is false when nothing is recorded there: the call runs live and records. When a step of
// another name is recorded there, ok is true and err is the non-determinism error: the
// workflow's code no longer calls what it called when the history was written.
func (h *history) at(step uint32, name string) (e entry, ok bool, err error) {
	rec := h.steps[step]
	if rec == nil {
		return entry{}, false, nil
	}
	if rec.GetName() != name {
		return entry{}, true, fmt.Errorf("%w: "+nonDeterminismMessage, ErrNonDeterminism, h.workflowID, name, step, rec.GetName())
	}
	return entry{output: rec.GetOutput(), failure: rec.GetFailure()}, true, nil
}

// replay is the recorded result of step name at position step as a T, ok false when nothing
// is recorded there. A recorded failure is the *StepError the live step returned.
func replay[T any](h *history, step uint32, name string) (v T, ok bool, err error) {
	e, ok, err := h.at(step, name)
	if !ok || err != nil {
		return v, ok, err
	}
	v, err = stepOutcome[T](name, e)
	return v, true, err
}

// stepOutcome is a step's outcome as the workflow sees it: its output as a T, or its failure
// as a *StepError. A replay and a live remote step read their outcome through it alike, so the
// workflow cannot tell them apart.
func stepOutcome[T any](name string, e entry) (T, error) {
	if f := e.failure; f != nil {
		var zero T
		return zero, &StepError{Step: name, Message: f.GetMessage(), Reason: f.GetKind()}
	}
	return decodePayload[T](e.output)
}

// builtinRecord is the JSON a built-in step records (see worker.proto): an object's fields,
// or null — what a wait that timed out records as its outcome.
type builtinRecord struct {
	fields map[string]json.RawMessage
	null   bool
}

// builtin is the built-in step name recorded at position step, decoded; ok false when nothing
// is recorded there. Only its output is read: the server records built-in steps with one.
func (h *history) builtin(step uint32, name string) (b builtinRecord, ok bool, err error) {
	e, ok, err := h.at(step, name)
	if !ok || err != nil {
		return b, ok, err
	}
	raw, err := payloadJSON(e.output)
	if err != nil {
		return b, true, err
	}
	if string(raw) == "null" {
		return builtinRecord{fields: map[string]json.RawMessage{}, null: true}, true, nil
	}
	if err := json.Unmarshal(raw, &b.fields); err != nil {
		return builtinRecord{}, true, fmt.Errorf("waymark: recorded %s step is not an object: %w", name, err)
	}
	return b, true, nil
}

// field reads one field of a recorded object as a T; a missing one reads as the zero value.
func field[T any](fields map[string]json.RawMessage, name string) T {
	var v T
	if raw, ok := fields[name]; ok {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}

// recordedNow is the clock reading a waymark.now step records at position step ({"now_ms": N}),
// in UTC; ok false when nothing is recorded there.
func (h *history) recordedNow(step uint32) (t time.Time, ok bool, err error) {
	ms, ok, err := requiredField[int64](h, step, nowStep, "now_ms")
	if !ok || err != nil {
		return t, ok, err
	}
	return time.UnixMilli(ms).UTC(), true, nil
}

// recordedUUID is the UUID a waymark.uuid step records at position step ({"uuid": "…"}); ok
// false when nothing is recorded there.
func (h *history) recordedUUID(step uint32) (string, bool, error) {
	return requiredField[string](h, step, uuidStep, "uuid")
}

// requiredField reads the one field of a built-in record that is the whole of what it
// recorded. Unlike field, a record without it is an error, not a zero value: a replay that
// returned the zero time or an empty UUID would hand the workflow a value it never had.
func requiredField[T any](h *history, step uint32, name, key string) (v T, ok bool, err error) {
	rec, ok, err := h.builtin(step, name)
	if !ok || err != nil {
		return v, ok, err
	}
	raw, found := rec.fields[key]
	if !found {
		return v, true, fmt.Errorf("waymark: recorded %s step has no %s", name, key)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, true, fmt.Errorf("waymark: recorded %s step's %s: %w", name, key, err)
	}
	return v, true, nil
}

// patchAnswer is what history.patched found at the next position.
type patchAnswer int

const (
	// patchOld: another step is recorded there (the run began under code without the change,
	// or another patch's marker is): the old branch; the position is not taken.
	patchOld patchAnswer = iota
	// patchReplayed: this patch's marker is recorded there: the new branch; the position is
	// taken and nothing is recorded.
	patchReplayed
	// patchLive: nothing is recorded there: the new branch; the position is taken and the
	// caller records the marker at it.
	patchLive
)

// patched is whether the run takes the branch of the code change patchID (see worker.proto's
// `patched`). It looks at the next position without taking it, and takes it only when the
// answer is the new branch: nothing recorded there (patchLive), or this patch's marker
// (patchReplayed); anything else leaves it to the next call (patchOld). The look and the take
// are one step under the cursor's lock, so a call taking positions from another goroutine
// cannot come between them. A marker without its patch_id (or not an object) is an error, and
// takes nothing.
func (h *history) patched(patchID string) (answer patchAnswer, step uint32, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at := h.next
	switch rec := h.steps[at]; {
	case rec == nil:
		answer = patchLive
	case rec.GetName() != patchStep:
		return patchOld, 0, nil
	default:
		// steps is only read, so builtin reads it under the lock as it does without.
		id, _, err := requiredField[string](h, at, patchStep, "patch_id")
		if err != nil {
			return patchOld, 0, err
		}
		if id != patchID {
			return patchOld, 0, nil
		}
		answer = patchReplayed
	}
	h.next++
	return answer, at, nil
}
