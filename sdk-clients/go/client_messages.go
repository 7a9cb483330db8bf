package waymark

import (
	"context"
	"encoding/json"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Sent is the result of a send.
type Sent struct {
	MessageID string
	// True when an earlier send with the same idempotency key was delivered instead.
	Duplicate bool
}

// SendOptions are a send's options; nil means none.
type SendOptions struct {
	// IdempotencyKey makes a retried send deliver once (1-256 characters).
	IdempotencyKey string
}

// Send sends message to workflow workflowID on topic ("" is the default topic), where a recv
// takes it. A workflow that does not exist is reason WORKFLOW_NOT_FOUND.
func (c *Client) Send(ctx context.Context, workflowID, topic string, message any, opts *SendOptions) (Sent, error) {
	payload, err := toPayload(message)
	if err != nil {
		return Sent{}, err
	}
	req := &pb.SendMessageRequest{WorkflowId: workflowID, Topic: topic, Message: payload}
	if opts != nil {
		req.IdempotencyKey = opts.IdempotencyKey
	}
	var r *pb.SendMessageResponse
	if req.IdempotencyKey != "" {
		// Only a send with a key is delivered once however often it is made.
		r, err = retried(ctx, c.workflows.SendMessage, req)
	} else {
		r, err = c.workflows.SendMessage(ctx, req)
		err = rpcError(err)
	}
	if err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: r.GetMessageId(), Duplicate: r.GetDuplicate()}, nil
}

// StartedAndSent is a start-and-send's result: the workflow that got the message, as it
// stands after the call, and whether this call started it; and the message sent.
type StartedAndSent struct {
	Started
	Sent
}

// StartAndSend starts workflow name with input (opts as for Start, nil for none) unless a
// workflow was started under opts.ID already, and sends the workflow message on topic (as
// Send does), in one transaction: either both happen or neither, and the message is there
// before the workflow first runs. Give an ID to reach the same workflow every time — one per
// customer fed by events, say; without one, each call starts a new workflow. A call repeated
// with the same ID and IdempotencyKey neither starts nor delivers again: Created false,
// Duplicate true, and the first call's MessageID. Like Send, it is sent again after
// UNAVAILABLE only with a key; without one a lost reply would deliver twice. Refused: a
// debounced start (INVALID_ARGUMENT: collapsed onto another start, it would never run as
// itself); a workflow under the id that ended with an outcome, with reason
// WORKFLOW_NOT_RUNNING; another workflow name under the id, with WORKFLOW_ID_CONFLICT.
func (c *Client) StartAndSend(ctx context.Context, name string, input any, opts *StartOptions, topic string, message any, sendOpts *SendOptions) (*StartedAndSent, error) {
	start, err := startRequest(name, input, opts)
	if err != nil {
		return nil, err
	}
	payload, err := toPayload(message)
	if err != nil {
		return nil, err
	}
	req := &pb.StartAndSendRequest{Start: start, Topic: topic, Message: payload}
	if sendOpts != nil {
		req.IdempotencyKey = sendOpts.IdempotencyKey
	}
	var r *pb.StartAndSendResponse
	if req.IdempotencyKey != "" {
		// The start is one start however often it is made (its id is fixed in the request),
		// but the message is delivered once only with a key.
		r, err = retried(ctx, c.workflows.StartAndSend, req)
	} else {
		r, err = c.workflows.StartAndSend(ctx, req)
		err = rpcError(err)
	}
	if err != nil {
		return nil, err
	}
	return &StartedAndSent{
		Started: Started{Workflow: workflowFromWire(r.GetWorkflow()), Created: r.GetCreated(), NameRegistered: r.GetNameRegistered()},
		Sent:    Sent{MessageID: r.GetMessageId(), Duplicate: r.GetDuplicate()},
	}, nil
}

// Messages lists every message sent to a workflow, consumed or not, oldest first, reading
// every page.
func (c *Client) Messages(ctx context.Context, workflowID string) ([]Message, error) {
	return readAll(ctx, c.workflows.ListMessages,
		func(token string) *pb.ListMessagesRequest {
			return &pb.ListMessagesRequest{WorkflowId: workflowID, PageToken: token}
		},
		(*pb.ListMessagesResponse).GetMessages, messageFromWire)
}

// GetEvent reads a workflow's event key; found is false when it is not set. With a timeout
// (at most 24 hours) it waits up to that long for the event to be set.
func (c *Client) GetEvent(ctx context.Context, workflowID, key string, timeout time.Duration) (value json.RawMessage, found bool, err error) {
	if timeout > 0 {
		// Room for the server to answer "not set" itself rather than the call timing out.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout+5*time.Second)
		defer cancel()
	}
	r, err := retried(ctx, c.workflows.GetEvent, &pb.GetEventRequest{WorkflowId: workflowID, Key: key, Timeout: durationOrNil(timeout)})
	if err != nil {
		return nil, false, err
	}
	if !r.GetFound() {
		return nil, false, nil
	}
	value, err = payloadJSON(r.GetValue())
	return value, err == nil, err
}

// GetEventAs is GetEvent with the value decoded as T.
func GetEventAs[T any](ctx context.Context, c *Client, workflowID, key string, timeout time.Duration) (T, bool, error) {
	var zero T
	raw, found, err := c.GetEvent(ctx, workflowID, key, timeout)
	if err != nil || !found {
		return zero, found, err
	}
	v, err := decodeJSON[T](raw)
	return v, err == nil, err
}

// Events lists every event of a workflow, with the history of its values, reading every
// page.
func (c *Client) Events(ctx context.Context, workflowID string) ([]Event, error) {
	return readAll(ctx, c.workflows.ListEvents,
		func(token string) *pb.ListEventsRequest {
			return &pb.ListEventsRequest{WorkflowId: workflowID, PageToken: token}
		},
		(*pb.ListEventsResponse).GetEvents, eventFromWire)
}
