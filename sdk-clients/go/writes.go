package waymark

import (
	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Send sends message to workflow destinationID on topic ("" is the default topic) and returns
// the message id. It is recorded as a step in the same transaction: a replay does not send
// again. A message larger than the server takes is not sent (ErrPayloadTooLarge).
func Send(ctx Context, destinationID, topic string, message any) (string, error) {
	r := ctx.run()
	step, err := r.take(1)
	if err != nil {
		return "", err
	}
	rec, ok, err := r.hist.builtin(step, sendStep)
	if err != nil || ok {
		return field[string](rec.fields, "message_id"), err
	}
	if err := r.stopped(); err != nil {
		return "", err
	}
	payload, err := toPayload(message)
	if err != nil {
		return "", err
	}
	msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_SendMessage{SendMessage: &pb.SendMessageStep{
		WorkflowId: r.id, Epoch: r.epoch, StepId: step, DestinationId: destinationID, Topic: topic, Message: payload,
	}}}
	if err := r.conn.limits.admit("the message", payload, msg); err != nil {
		return "", err
	}
	reply, err := r.request(msg)
	if err != nil {
		return "", err
	}
	return reply.GetMessageSent().GetMessageId(), r.expect(reply, func(x *pb.Reply) bool { return x.GetMessageSent() != nil })
}

// SetEvent sets this workflow's event key to value. The current value, its history and the
// step are written in one transaction; clients and workflows waiting on it are woken. A value
// larger than the server takes is not sent (ErrPayloadTooLarge).
func SetEvent(ctx Context, key string, value any) error {
	r := ctx.run()
	step, err := r.take(1)
	if err != nil {
		return err
	}
	if _, ok, err := r.hist.builtin(step, setEventStep); err != nil || ok {
		return err
	}
	if err := r.stopped(); err != nil {
		return err
	}
	payload, err := toPayload(value)
	if err != nil {
		return err
	}
	msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_SetEvent{SetEvent: &pb.SetEvent{
		WorkflowId: r.id, Epoch: r.epoch, StepId: step, Key: key, Value: payload,
	}}}
	if err := r.conn.limits.admit("the event's value", payload, msg); err != nil {
		return err
	}
	reply, err := r.request(msg)
	if err != nil {
		return err
	}
	return r.expect(reply, func(x *pb.Reply) bool { return x.GetStepRecorded() != nil })
}

// WriteStream appends value to this workflow's stream key and returns its offset. Recorded as
// a step, so a replay does not append again; readers following the stream get it at once. A
// value larger than the server takes is not sent (ErrPayloadTooLarge).
func WriteStream(ctx Context, key string, value any) (uint64, error) {
	payload, err := toPayload(value)
	if err != nil {
		return 0, err
	}
	return streamStep(ctx.run(), key, payload, writeStreamStep)
}

// CloseStream closes this workflow's stream key: readers end after the values written before.
func CloseStream(ctx Context, key string) error {
	_, err := streamStep(ctx.run(), key, nil, closeStreamStep)
	return err
}

func streamStep(r *run, key string, value *pb.Payload, name string) (uint64, error) {
	step, err := r.take(1)
	if err != nil {
		return 0, err
	}
	rec, ok, err := r.hist.builtin(step, name)
	if err != nil || ok {
		return field[uint64](rec.fields, "offset"), err
	}
	if err := r.stopped(); err != nil {
		return 0, err
	}
	msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_WriteStream{WriteStream: &pb.WriteStream{
		WorkflowId: r.id, Epoch: r.epoch, StepId: step, Key: key, Value: value, Close: value == nil,
	}}}
	if value != nil {
		if err := r.conn.limits.admit("the stream value", value, msg); err != nil {
			return 0, err
		}
	}
	reply, err := r.request(msg)
	if err != nil {
		return 0, err
	}
	return reply.GetStreamWritten().GetOffset(), r.expect(reply, func(x *pb.Reply) bool { return x.GetStreamWritten() != nil })
}
