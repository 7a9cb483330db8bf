package waymark_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// The end and the start of a workflow's life, against the real server: deleting finished
// workflows (one, or a tree) and the refusals for what has not finished; and a workflow
// enqueued before any worker registers its name, which runs once one does.

// wantRefused fails the test unless err is an *Error with this code and reason.
func wantRefused(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Code != code || werr.Reason != reason {
		t.Fatalf("%s: want %v %s, got %#v", what, code, reason, err)
	}
}

func TestDeleteFinishedWorkflowsAndTheirTrees(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "leaf", func(_ waymark.Context, n int) (int, error) { return n, nil })
	// Two children, both finished, then a wait for "go": while it waits, the parent has not
	// finished and neither it nor its children can be deleted.
	waymark.RegisterWorkflow(w, "family", func(ctx waymark.Context, _ any) (int, error) {
		a, err := waymark.RunChild[int](ctx, "leaf", 1, &waymark.ChildOptions{ID: ctx.WorkflowID() + "-a"})
		if err != nil {
			return 0, err
		}
		b, err := waymark.RunChild[int](ctx, "leaf", 2, &waymark.ChildOptions{ID: ctx.WorkflowID() + "-b"})
		if err != nil {
			return 0, err
		}
		if _, _, err := waymark.Recv[any](ctx, "go", time.Hour); err != nil {
			return 0, err
		}
		return a + b, nil
	})
	waymark.RegisterWorkflow(w, "inbox", func(ctx waymark.Context, _ any) (any, error) {
		_, _, err := waymark.Recv[any](ctx, "t", time.Hour)
		return nil, err
	})
	runWorker(t, w, queue)

	id := start(t, c, "family", queue, nil)
	childA, childB := id+"-a", id+"-b"
	eventually(t, "both children to finish", func() (bool, error) {
		wf, err := c.Get(ctx, childB)
		return err == nil && wf.Status == waymark.StatusSuccess, err
	})
	_, err := c.Delete(ctx, childA, false)
	wantRefused(t, "a child of a waiting parent", err, codes.FailedPrecondition, "PARENT_NOT_FINISHED")
	_, err = c.Delete(ctx, id, true)
	wantRefused(t, "a waiting parent", err, codes.FailedPrecondition, "WORKFLOW_NOT_FINISHED")
	if _, err := c.Send(ctx, id, "go", nil, nil); err != nil {
		t.Fatal(err)
	}
	if wf := await(t, c, id); wf.Status != waymark.StatusSuccess {
		t.Fatalf("family: %+v", wf)
	}

	// A child goes alone; then the parent with what is left of its tree, asked-for id first.
	deleted, err := c.Delete(ctx, childA, false)
	if err != nil || !slices.Equal(deleted, []string{childA}) {
		t.Fatalf("delete %s: %v %v", childA, deleted, err)
	}
	deleted, err = c.Delete(ctx, id, true)
	if err != nil || !slices.Equal(deleted, []string{id, childB}) {
		t.Fatalf("delete %s with cascade: %v %v", id, deleted, err)
	}
	for _, gone := range []string{id, childA, childB} {
		_, err := c.Get(ctx, gone)
		wantRefused(t, "get "+gone, err, codes.NotFound, "WORKFLOW_NOT_FOUND")
		_, err = c.Steps(ctx, gone)
		wantRefused(t, "steps of "+gone, err, codes.NotFound, "WORKFLOW_NOT_FOUND")
	}
	_, err = c.Delete(ctx, id, false)
	wantRefused(t, "a repeated delete", err, codes.NotFound, "WORKFLOW_NOT_FOUND")
	_, err = c.Delete(ctx, unique("missing"), true)
	wantRefused(t, "a workflow that never was", err, codes.NotFound, "WORKFLOW_NOT_FOUND")

	// Waiting for a message: not finished, refused, and nothing touched; cancelled, deleted
	// with its inbox.
	waiting := unique("waiting")
	opts := &waymark.StartOptions{ID: waiting, Queue: queue}
	if _, err := c.Start(ctx, "inbox", nil, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, waiting, "other", "unread", nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.Delete(ctx, waiting, false)
	wantRefused(t, "a workflow waiting on recv", err, codes.FailedPrecondition, "WORKFLOW_NOT_FINISHED")
	if msgs, err := c.Messages(ctx, waiting); err != nil || len(msgs) != 1 {
		t.Fatalf("a refused delete touches nothing: %v %v", msgs, err)
	}
	if _, err := c.Cancel(ctx, waiting); err != nil {
		t.Fatal(err)
	}
	if wf := await(t, c, waiting); wf.Status != waymark.StatusCancelled {
		t.Fatalf("after cancel: %+v", wf)
	}
	deleted, err = c.Delete(ctx, waiting, false)
	if err != nil || !slices.Equal(deleted, []string{waiting}) {
		t.Fatalf("delete after cancel: %v %v", deleted, err)
	}
	_, err = c.Get(ctx, waiting)
	wantRefused(t, "get after delete", err, codes.NotFound, "WORKFLOW_NOT_FOUND")
	// The same id starts afresh: nothing of the old one is left to read.
	again, err := c.Start(ctx, "inbox", nil, opts)
	if err != nil || !again.Created {
		t.Fatalf("start the deleted id again: %+v %v", again, err)
	}
	if msgs, err := c.Messages(ctx, waiting); err != nil || len(msgs) != 0 {
		t.Fatalf("the old inbox went with it: %v %v", msgs, err)
	}
	if _, err := c.Cancel(ctx, waiting); err != nil {
		t.Fatal(err)
	}
}

func TestStartBeforeAnyWorkerRegistersTheName(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	name, queue, id := unique("late"), newQueue(t, c), unique("early")
	// No worker has registered the name: refused unless the start allows it.
	_, err := c.Start(ctx, name, 1, &waymark.StartOptions{Queue: queue})
	wantRefused(t, "a start of an unregistered name", err, codes.NotFound, "WORKFLOW_NAME_UNKNOWN")
	early := &waymark.StartOptions{ID: id, Queue: queue, AllowUnregistered: true}
	started, err := c.Start(ctx, name, map[string]int{"n": 7}, early)
	if err != nil || !started.Created || started.NameRegistered || started.Status != waymark.StatusEnqueued {
		t.Fatalf("start allowing an unregistered name: %+v %v", started, err)
	}
	again, err := c.Start(ctx, name, map[string]int{"n": 7}, early)
	if err != nil || again.Created || again.ID != id {
		t.Fatalf("a retried start is the same start: %+v %v", again, err)
	}

	// The worker arrives (a rolling deploy) and takes it.
	w, own := newWorker(t, waymark.WorkerOptions{Queues: []string{queue}})
	waymark.RegisterWorkflow(w, name, func(_ waymark.Context, in map[string]int) (map[string]int, error) { return in, nil })
	runWorker(t, w, own)
	wf := await(t, c, id)
	if out, err := waymark.Output[map[string]int](wf); wf.Status != waymark.StatusSuccess || err != nil || out["n"] != 7 {
		t.Fatalf("the early workflow: %+v output %v (%v)", wf, out, err)
	}
	later, err := c.Start(ctx, name, map[string]int{"n": 2}, &waymark.StartOptions{Queue: queue, AllowUnregistered: true})
	if err != nil || !later.NameRegistered {
		t.Fatalf("a start once the name is registered: %+v %v", later, err)
	}
	await(t, c, later.ID)
}
