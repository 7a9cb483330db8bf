package waymark

import (
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Recv takes the oldest message sent to this workflow on topic ("" is the default topic),
// waiting up to timeout for one; ok is false when none came in time. The deadline is recorded
// first, so a recovered workflow keeps its original timeout, and the message is consumed and
// recorded in one transaction, so it is received exactly once. The server wakes the wait when a
// message arrives; nothing polls. A wait longer than the park threshold parks the workflow.
func Recv[T any](ctx Context, topic string, timeout time.Duration) (msg T, ok bool, err error) {
	r := ctx.run()
	step, err := r.take(2)
	if err != nil {
		return msg, false, err
	}
	raw, ok, err := r.durableWait(durableWait{
		deadlineStep: step, deadlineName: recvDeadlineStep, resultName: recvStep, field: "message",
		timeout: timeout,
		span:    "recv",
		attrs:   []attribute.KeyValue{attrWaitTopic.String(topic)},
		parkOn:  func(p *pb.Park) { p.On = &pb.Park_Topic{Topic: topic} },
		request: func(step uint32, deadlineMs int64) *pb.WorkerMessage {
			return &pb.WorkerMessage{Kind: &pb.WorkerMessage_Recv{Recv: &pb.Recv{
				WorkflowId: r.id, Epoch: r.epoch, StepId: step, Topic: topic, DeadlineMs: deadlineMs,
			}}}
		},
	})
	if err != nil || !ok {
		return msg, false, err
	}
	msg, err = decodeJSON[T](raw)
	return msg, err == nil, err
}

// GetEvent reads workflow workflowID's event key, waiting up to timeout for it to be set; ok
// is false when it was not. Recorded, with its deadline, like Recv.
func GetEvent[T any](ctx Context, workflowID, key string, timeout time.Duration) (value T, ok bool, err error) {
	r := ctx.run()
	step, err := r.take(2)
	if err != nil {
		return value, false, err
	}
	raw, ok, err := r.durableWait(durableWait{
		deadlineStep: step, deadlineName: getEventDeadlineStep, resultName: getEventStep, field: "value",
		timeout: timeout,
		span:    "event",
		attrs:   []attribute.KeyValue{attrWaitKey.String(key)},
		parkOn: func(p *pb.Park) {
			p.On = &pb.Park_Event{Event: &pb.EventKey{WorkflowId: workflowID, Key: key}}
		},
		request: func(step uint32, deadlineMs int64) *pb.WorkerMessage {
			return &pb.WorkerMessage{Kind: &pb.WorkerMessage_GetEvent{GetEvent: &pb.GetEventStep{
				WorkflowId: r.id, Epoch: r.epoch, StepId: step, TargetWorkflowId: workflowID, Key: key, DeadlineMs: deadlineMs,
			}}}
		},
	})
	if err != nil || !ok {
		return value, false, err
	}
	value, err = decodeJSON[T](raw)
	return value, err == nil, err
}

// durableWait is a wait that takes two step positions: the deadline (recorded first, so a
// recovery keeps it) and the outcome, which the server records.
type durableWait struct {
	deadlineStep             uint32
	deadlineName, resultName string
	// The field of the recorded outcome that holds the value.
	field   string
	timeout time.Duration
	// The kind of its span (`wait <span>`) and its attributes.
	span    string
	attrs   []attribute.KeyValue
	parkOn  func(*pb.Park)
	request func(step uint32, deadlineMs int64) *pb.WorkerMessage
}

// durableWait asks the server, and on WAITING waits for its wakeup or the deadline (or parks),
// then asks again.
func (r *run) durableWait(w durableWait) (json.RawMessage, bool, error) {
	resultStep := w.deadlineStep + 1
	rec, ok, err := r.hist.builtin(w.deadlineStep, w.deadlineName)
	if err != nil {
		return nil, false, err
	}
	deadline := field[int64](rec.fields, "deadline_ms")
	if !ok {
		if err := r.stopped(); err != nil {
			return nil, false, err
		}
		deadline = after(w.timeout)
		if err := r.record(w.deadlineStep, w.deadlineName, mustPayload(map[string]any{"deadline_ms": deadline})); err != nil {
			return nil, false, err
		}
	}
	rec, ok, err = r.hist.builtin(resultStep, w.resultName)
	if err != nil || ok {
		if rec.null || err != nil {
			return nil, false, err
		}
		return field[json.RawMessage](rec.fields, w.field), true, nil
	}
	// Not recorded: the wait happens now.
	span := r.startWait(w.span, w.deadlineStep, w.attrs...)
	defer r.endSpan(span)
	for {
		if err := r.stopped(); err != nil {
			return nil, false, err
		}
		// The server may have completed the wait itself and pushed the answer with the wakeup.
		if p, ok := r.takeDelivered(resultStep); ok {
			raw, err := payloadJSON(p)
			return raw, err == nil, err
		}
		reply, err := r.request(w.request(resultStep, deadline))
		if err != nil {
			return nil, false, err
		}
		var outcome pb.RecvResult_Outcome
		var value *pb.Payload
		var serverNow int64
		switch res := reply.GetResult().(type) {
		case *pb.Reply_RecvResult:
			outcome, value, serverNow = res.RecvResult.GetOutcome(), res.RecvResult.GetMessage(), res.RecvResult.GetServerNowMs()
		case *pb.Reply_EventResult:
			outcome, value, serverNow = res.EventResult.GetOutcome(), res.EventResult.GetValue(), res.EventResult.GetServerNowMs()
		default:
			return nil, false, r.expect(reply, func(*pb.Reply) bool { return false })
		}
		switch outcome {
		case pb.RecvResult_OUTCOME_DELIVERED:
			raw, err := payloadJSON(value)
			return raw, err == nil, err
		case pb.RecvResult_OUTCOME_TIMED_OUT:
			return nil, false, nil
		}
		// Wait for a wakeup, or until the deadline by the server's clock.
		if r.shouldPark(deadline, serverNow) {
			if err := r.park(resultStep, deadline, w.parkOn); err != nil {
				return nil, false, err
			}
			continue
		}
		if err := r.waitUntil(deadline, serverNow); err != nil {
			return nil, false, err
		}
	}
}
