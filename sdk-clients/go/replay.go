package waymark

import (
	"encoding/json"
	"fmt"

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
	stepFailedKind        = "StepFailed"
	nonDeterminismMessage = "workflow %q called step %q at position %d, where its history records %q"
)

// checkName fails a replay that calls a different step than its history records there.
func (r *run) checkName(step uint32, name string, rec *pb.Step) error {
	if rec.GetName() != name {
		return fmt.Errorf("%w: "+nonDeterminismMessage, ErrNonDeterminism, r.id, name, step, rec.GetName())
	}
	return nil
}

// replayed is the recorded result of a step as a T (a recorded failure as a *StepError).
func replayed[T any](r *run, step uint32, name string, rec *pb.Step) (T, error) {
	var zero T
	if err := r.checkName(step, name, rec); err != nil {
		return zero, err
	}
	if f := rec.GetFailure(); f != nil {
		return zero, &StepError{Step: name, Message: f.GetMessage(), Reason: f.GetKind()}
	}
	return decodePayload[T](rec.GetOutput())
}

// recordedFields is the JSON object a wait step recorded under name at step, if recorded
// there. A recorded null reads as an empty object with isNull true.
func (r *run) recordedFields(step uint32, name string) (fields map[string]json.RawMessage, isNull, ok bool, err error) {
	rec := r.recorded[step]
	if rec == nil {
		return nil, false, false, nil
	}
	if err := r.checkName(step, name, rec); err != nil {
		return nil, false, true, err
	}
	raw, err := payloadJSON(rec.GetOutput())
	if err != nil {
		return nil, false, true, err
	}
	if string(raw) == "null" {
		return map[string]json.RawMessage{}, true, true, nil
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, false, true, fmt.Errorf("waymark: recorded %s step is not an object: %w", name, err)
	}
	return fields, false, true, nil
}

// field reads one field of a recorded object as a T; missing reads as the zero value.
func field[T any](fields map[string]json.RawMessage, name string) T {
	var v T
	if raw, ok := fields[name]; ok {
		_ = json.Unmarshal(raw, &v)
	}
	return v
}
