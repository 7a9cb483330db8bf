package waymark_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// StartAndSend against the real server: the first call starts the workflow with the message in
// its inbox; the same call again (same id, same key) starts nothing and delivers nothing; a
// call with another key sends to the workflow already there. The workflows are started on a
// queue no worker serves, so they stay ENQUEUED and their messages unread.
func TestStartAndSendStartsAndDeliversOnce(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, id := newQueue(t, c), unique("wf")
	opts := &waymark.StartOptions{ID: id, Queue: queue}
	first, err := c.StartAndSend(ctx, "noworker", map[string]any{"n": 1}, opts, "orders", order{Item: "tea", Count: 2},
		&waymark.SendOptions{IdempotencyKey: "event-1"})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || !first.NameRegistered || first.Duplicate || first.MessageID == "" || first.ID != id ||
		first.Name != "noworker" || first.Queue != queue || first.Status != waymark.StatusEnqueued || string(first.Input) != `{"n":1}` {
		t.Fatalf("first call: %+v (workflow %+v)", first, first.Workflow)
	}
	msgs, err := c.Messages(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].ID != first.MessageID || msgs[0].Topic != "orders" || msgs[0].IdempotencyKey != "event-1" || msgs[0].Consumed {
		t.Fatalf("messages after the first call: %+v", msgs)
	}
	// Compared decoded: the server keeps JSON objects with their keys in its own order.
	var body order
	if err := json.Unmarshal(msgs[0].Payload, &body); err != nil || body != (order{Item: "tea", Count: 2}) {
		t.Fatalf("message %s (%v)", msgs[0].Payload, err)
	}

	again, err := c.StartAndSend(ctx, "noworker", map[string]any{"n": 1}, opts, "orders", order{Item: "tea", Count: 2},
		&waymark.SendOptions{IdempotencyKey: "event-1"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Created || !again.Duplicate || again.MessageID != first.MessageID || again.ID != id {
		t.Fatalf("the same call again: %+v", again)
	}
	if msgs, err := c.Messages(ctx, id); err != nil || len(msgs) != 1 {
		t.Fatalf("messages after the same call again: %+v %v", msgs, err)
	}

	// Another event for the same workflow: delivered to it, which is not started again (the
	// input of this call is not the workflow's).
	next, err := c.StartAndSend(ctx, "noworker", map[string]any{"n": 2}, opts, "orders", order{Item: "jam", Count: 1},
		&waymark.SendOptions{IdempotencyKey: "event-2"})
	if err != nil {
		t.Fatal(err)
	}
	if next.Created || next.Duplicate || next.MessageID == first.MessageID || next.ID != id || string(next.Input) != `{"n":1}` {
		t.Fatalf("a second event: %+v", next)
	}
	msgs, err = c.Messages(ctx, id)
	if err != nil || len(msgs) != 2 || msgs[0].ID != first.MessageID || msgs[1].ID != next.MessageID {
		t.Fatalf("messages after a second event: %+v %v", msgs, err)
	}

	// Another workflow name under the id is not that workflow, and gets nothing.
	_, err = c.StartAndSend(ctx, "not-noworker", nil, &waymark.StartOptions{ID: id, Queue: queue, AllowUnregistered: true},
		"orders", order{Item: "salt"}, nil)
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Code != codes.AlreadyExists || werr.Reason != "WORKFLOW_ID_CONFLICT" {
		t.Fatalf("another name under the id: want ALREADY_EXISTS WORKFLOW_ID_CONFLICT, got %#v", err)
	}
	if msgs, err := c.Messages(ctx, id); err != nil || len(msgs) != 2 {
		t.Fatalf("messages after a conflicting call: %+v %v", msgs, err)
	}
}

// The workflow started reads the message the call sent it, on its topic; once it has ended
// with an outcome it takes no more, and the call says so rather than starting it again.
func TestStartAndSendMessageReachesTheWorkflow(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "customer", func(ctx waymark.Context, name string) (string, error) {
		o, ok, err := waymark.Recv[order](ctx, "orders", time.Minute)
		if err != nil || !ok {
			return "", fmt.Errorf("recv: ok %v err %w", ok, err)
		}
		return fmt.Sprintf("%s: %d %s", name, o.Count, o.Item), nil
	})
	runWorker(t, w, queue)
	id := unique("customer")
	opts := &waymark.StartOptions{ID: id, Queue: queue}
	sent, err := c.StartAndSend(ctx, "customer", "ada", opts, "orders", order{Item: "tea", Count: 3}, nil)
	if err != nil || !sent.Created {
		t.Fatalf("start and send: %+v %v", sent, err)
	}
	wf := await(t, c, id)
	got, err := waymark.Output[string](wf)
	if wf.Status != waymark.StatusSuccess || err != nil || got != "ada: 3 tea" {
		t.Fatalf("workflow %s output %q (%v)", wf.Status, got, err)
	}
	msgs, err := c.Messages(ctx, id)
	if err != nil || len(msgs) != 1 || msgs[0].ID != sent.MessageID || !msgs[0].Consumed {
		t.Fatalf("messages: %+v %v", msgs, err)
	}

	_, err = c.StartAndSend(ctx, "customer", "ada", opts, "orders", order{Item: "jam", Count: 1}, nil)
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Code != codes.FailedPrecondition || werr.Reason != "WORKFLOW_NOT_RUNNING" {
		t.Fatalf("to a finished workflow: want FAILED_PRECONDITION WORKFLOW_NOT_RUNNING, got %#v", err)
	}
	if msgs, err := c.Messages(ctx, id); err != nil || len(msgs) != 1 {
		t.Fatalf("messages after the refused call: %+v %v", msgs, err)
	}
}

// A debounced start could be collapsed onto another start and never run as itself, so the
// server refuses it, and starts nothing.
func TestStartAndSendRefusesADebouncedStart(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, id := newQueue(t, c), unique("wf")
	opts := &waymark.StartOptions{ID: id, Queue: queue, Delay: time.Hour, Debounce: &waymark.Debounce{Key: unique("k")}}
	_, err := c.StartAndSend(ctx, "noworker", nil, opts, "orders", order{Item: "tea"}, &waymark.SendOptions{IdempotencyKey: "k1"})
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Code != codes.InvalidArgument {
		t.Fatalf("want INVALID_ARGUMENT, got %#v", err)
	}
	if _, err := c.Get(ctx, id); !waymark.IsReason(err, "WORKFLOW_NOT_FOUND") {
		t.Fatalf("the refused call started a workflow: %v", err)
	}
}
