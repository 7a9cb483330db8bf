package waymark_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Workflow updates against the real server: a cart workflow takes "add" updates (RecvUpdate),
// rejects a quantity below one, adds the rest in a step and answers with the running total;
// after `limit` items it returns the total.

type cartItem struct {
	Item string `json:"item"`
	Qty  int    `json:"qty"`
}

type cartTotal struct {
	Total int `json:"total"`
}

// cartWorker runs a worker with the cart workflow (and "forgetful", which takes one update and
// ends without answering it) on a queue of its own. added counts the runs of the cart's "add"
// step function.
func cartWorker(t *testing.T) (queue string, added *atomic.Int64) {
	t.Helper()
	added = new(atomic.Int64)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "cart", func(ctx waymark.Context, limit int) (int, error) {
		total := 0
		for items := 0; items < limit; {
			u, ok, err := waymark.RecvUpdate[cartItem](ctx, "add", time.Minute)
			if err != nil || !ok {
				return total, err
			}
			if u.Args.Qty < 1 {
				if err := waymark.RejectUpdate(ctx, u.ID, fmt.Sprintf("qty must be at least 1, not %d", u.Args.Qty)); err != nil {
					return 0, err
				}
				continue
			}
			before := total
			total, err = waymark.Step(ctx, "add", func(context.Context) (int, error) {
				added.Add(1)
				return before + u.Args.Qty, nil
			})
			if err != nil {
				return 0, err
			}
			if err := waymark.AnswerUpdate(ctx, u.ID, cartTotal{Total: total}); err != nil {
				return 0, err
			}
			items++
		}
		return total, nil
	})
	waymark.RegisterWorkflow(w, "forgetful", func(ctx waymark.Context, _ any) (string, error) {
		u, _, err := waymark.RecvUpdate[any](ctx, "add", time.Minute)
		return u.ID, err
	})
	runWorker(t, w, queue)
	return queue, added
}

// countSteps counts a workflow's recorded steps named name.
func countSteps(t *testing.T, c *waymark.Client, id, name string) int {
	t.Helper()
	n := 0
	for _, s := range stepNames(t, c, id) {
		if s == name {
			n++
		}
	}
	return n
}

// An update is answered with what the workflow answered; the same update id again is the same
// update: answered the same, its step not run again (neither its function nor its record),
// even once the workflow has ended.
func TestUpdateIsAnsweredOnceUnderItsID(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, added := cartWorker(t)
	id := start(t, c, "cart", queue, 2)

	first := &waymark.UpdateOptions{UpdateID: unique("u")}
	got, err := waymark.UpdateWorkflowAs[cartTotal](ctx, c, id, "add", cartItem{Item: "tea", Qty: 2}, first)
	if err != nil || got.Total != 2 {
		t.Fatalf("first update: %+v %v", got, err)
	}
	again, err := waymark.UpdateWorkflowAs[cartTotal](ctx, c, id, "add", cartItem{Item: "tea", Qty: 2}, first)
	if err != nil || again.Total != 2 {
		t.Fatalf("the same update again: %+v %v", again, err)
	}
	if n := countSteps(t, c, id, "add"); n != 1 || added.Load() != 1 {
		t.Fatalf("after the same update twice: %d recorded add steps, the step ran %d times; want 1 and 1", n, added.Load())
	}

	// Another id is another update: added to the total. It is the cart's last item.
	raw, err := c.UpdateWorkflow(ctx, id, "add", cartItem{Item: "jam", Qty: 3}, nil)
	if err != nil || string(raw) != `{"total":5}` {
		t.Fatalf("second update: %s %v", raw, err)
	}
	wf := await(t, c, id)
	if total, err := waymark.Output[int](wf); wf.Status != waymark.StatusSuccess || err != nil || total != 5 {
		t.Fatalf("cart %s returned %s (%v)", wf.Status, wf.Output, err)
	}
	// The answer stays: the first update asked again after the workflow ended is answered
	// again, not sent to a workflow that can no longer take it.
	late, err := waymark.UpdateWorkflowAs[cartTotal](ctx, c, id, "add", cartItem{Item: "tea", Qty: 2}, first)
	if err != nil || late.Total != 2 {
		t.Fatalf("the first update after the end: %+v %v", late, err)
	}
	if n := countSteps(t, c, id, "add"); n != 2 || added.Load() != 2 {
		t.Fatalf("in the end: %d recorded add steps, the step ran %d times; want 2 and 2", n, added.Load())
	}
	// Each update was one message to the workflow, however often it was asked.
	if msgs, err := c.Messages(ctx, id); err != nil || len(msgs) != 2 {
		t.Fatalf("messages: %+v %v", msgs, err)
	}
}

// A rejection reaches the caller as FAILED_PRECONDITION UPDATE_REJECTED with the workflow's
// reason; so does an update whose arguments do not decode as the workflow's type, which the
// SDK rejects. Neither fails the workflow or runs its step: the next update is answered.
func TestUpdateRejected(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, added := cartWorker(t)
	id := start(t, c, "cart", queue, 1)

	_, err := c.UpdateWorkflow(ctx, id, "add", cartItem{Item: "tea", Qty: 0}, nil)
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Code != codes.FailedPrecondition || werr.Reason != "UPDATE_REJECTED" ||
		!strings.Contains(werr.Message, "qty must be at least 1, not 0") {
		t.Fatalf("qty 0: want FAILED_PRECONDITION UPDATE_REJECTED with the workflow's reason, got %#v", err)
	}
	_, err = c.UpdateWorkflow(ctx, id, "add", map[string]any{"item": "tea", "qty": "lots"}, nil)
	if !waymark.IsReason(err, "UPDATE_REJECTED") || !strings.Contains(err.Error(), "its arguments do not fit") {
		t.Fatalf("qty \"lots\": want UPDATE_REJECTED, its arguments do not fit; got %v", err)
	}
	if n := countSteps(t, c, id, "add"); n != 0 || added.Load() != 0 {
		t.Fatalf("after two rejections: %d recorded add steps, the step ran %d times", n, added.Load())
	}

	got, err := waymark.UpdateWorkflowAs[cartTotal](ctx, c, id, "add", cartItem{Item: "tea", Qty: 4}, nil)
	if err != nil || got.Total != 4 {
		t.Fatalf("an update after the rejections: %+v %v", got, err)
	}
	wf := await(t, c, id)
	if total, err := waymark.Output[int](wf); wf.Status != waymark.StatusSuccess || err != nil || total != 4 {
		t.Fatalf("cart %s returned %s (%v)", wf.Status, wf.Output, err)
	}
}

// No answer within the timeout is DEADLINE_EXCEEDED UPDATE_PENDING, naming the update (its id
// generated by the client when the caller gave none), and the call returns in about the
// timeout. Asked again under that id, it is the same update, still pending.
func TestUpdateNotAnsweredInTimeIsPending(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, _ := cartWorker(t)
	id := start(t, c, "cart", queue, 1)

	// Nobody receives "remove": the cart only takes "add".
	began := time.Now()
	_, err := c.UpdateWorkflow(ctx, id, "remove", cartItem{Item: "tea", Qty: 1}, &waymark.UpdateOptions{Timeout: 300 * time.Millisecond})
	took := time.Since(began)
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Code != codes.DeadlineExceeded || werr.Reason != "UPDATE_PENDING" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want DEADLINE_EXCEEDED UPDATE_PENDING, got %#v", err)
	}
	if took < 300*time.Millisecond || took > 10*time.Second {
		t.Fatalf("the call took %v with a 300 ms timeout", took)
	}
	updateID := werr.Metadata["update_id"]
	uuidV7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	if !uuidV7.MatchString(updateID) {
		t.Fatalf("the pending update's id %q is not a UUID v7 the client made", updateID)
	}
	_, err = c.UpdateWorkflow(ctx, id, "remove", cartItem{Item: "tea", Qty: 1}, &waymark.UpdateOptions{UpdateID: updateID, Timeout: 300 * time.Millisecond})
	if !waymark.IsReason(err, "UPDATE_PENDING") {
		t.Fatalf("asked again: want UPDATE_PENDING, got %v", err)
	}
	if msgs, err := c.Messages(ctx, id); err != nil || len(msgs) != 1 || msgs[0].Topic != "waymark.update/remove" || msgs[0].Consumed {
		t.Fatalf("one unread update message: %+v %v", msgs, err)
	}
	// The cart still works.
	if got, err := waymark.UpdateWorkflowAs[cartTotal](ctx, c, id, "add", cartItem{Item: "tea", Qty: 1}, nil); err != nil || got.Total != 1 {
		t.Fatalf("an add after the pending one: %+v %v", got, err)
	}
}

// A workflow that ends without answering: UPDATE_NOT_ANSWERED; one that had ended already:
// WORKFLOW_NOT_RUNNING; none: WORKFLOW_NOT_FOUND; a negative timeout: INVALID_ARGUMENT.
func TestUpdateRefusals(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	queue, _ := cartWorker(t)
	id := start(t, c, "forgetful", queue, nil)

	_, err := c.UpdateWorkflow(ctx, id, "add", 1, &waymark.UpdateOptions{UpdateID: "ignored"})
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Code != codes.FailedPrecondition || werr.Reason != "UPDATE_NOT_ANSWERED" {
		t.Fatalf("the workflow ended without answering: want FAILED_PRECONDITION UPDATE_NOT_ANSWERED, got %#v", err)
	}
	wf := await(t, c, id)
	if got, err := waymark.Output[string](wf); err != nil || got != "ignored" {
		t.Fatalf("forgetful took update %q (%v)", got, err)
	}
	if _, err := c.UpdateWorkflow(ctx, id, "add", 2, nil); !waymark.IsReason(err, "WORKFLOW_NOT_RUNNING") {
		t.Fatalf("to a finished workflow: want WORKFLOW_NOT_RUNNING, got %v", err)
	}
	if _, err := c.UpdateWorkflow(ctx, unique("nobody"), "add", 3, nil); !waymark.IsReason(err, "WORKFLOW_NOT_FOUND") {
		t.Fatalf("to no workflow: want WORKFLOW_NOT_FOUND, got %v", err)
	}
	_, err = c.UpdateWorkflow(ctx, id, "add", 4, &waymark.UpdateOptions{Timeout: -time.Second})
	if !errors.As(err, &werr) || werr.Code != codes.InvalidArgument {
		t.Fatalf("a negative timeout: want INVALID_ARGUMENT, got %#v", err)
	}
}
