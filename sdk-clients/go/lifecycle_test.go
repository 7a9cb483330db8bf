package waymark_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// The end and the start of a workflow's life, against the real server: deleting finished
// workflows (one, or a tree) and the refusals for what has not finished; a workflow enqueued
// before any worker registers its name, which runs once one does; forking a workflow, and
// resuming a failed one on fixed code.

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

// effects records which steps of which workflow ran (not replayed), in order.
type effects struct {
	mu  sync.Mutex
	ran map[string][]int
}

func (e *effects) record(id string, step int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ran == nil {
		e.ran = map[string][]int{}
	}
	e.ran[id] = append(e.ran[id], step)
}

func (e *effects) of(id string) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.ran[id])
}

// A finished workflow of three steps forked from its step 1: the fork replays step 0 from the
// copied record and runs steps 1 and 2, and says where it came from.
func TestForkRunsOnlyTheStepsFromWhereItForked(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	var fx effects
	waymark.RegisterWorkflow(w, "counted", func(ctx waymark.Context, n int) (int, error) {
		sum := 0
		for i := range n {
			v, err := waymark.Step(ctx, fmt.Sprintf("step-%d", i), func(context.Context) (int, error) {
				fx.record(ctx.WorkflowID(), i)
				return i, nil
			})
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	runWorker(t, w, queue)

	source := start(t, c, "counted", queue, 3)
	if wf := await(t, c, source); wf.Status != waymark.StatusSuccess || !slices.Equal(fx.of(source), []int{0, 1, 2}) {
		t.Fatalf("the source: %+v, ran %v", wf, fx.of(source))
	}
	id := unique("forked")
	fork, err := c.Fork(ctx, source, waymark.ForkOptions{FromStep: waymark.FromStep(1), ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if fork.ID != id || fork.ForkedFromID != source || fork.ForkedFromStep != 1 || fork.Name != "counted" || fork.Queue != queue {
		t.Fatalf("the fork: %+v", fork)
	}
	done := await(t, c, id)
	if out, err := waymark.Output[int](done); err != nil || out != 3 {
		t.Fatalf("the fork finished %+v: %v %v", done, out, err)
	}
	if ran := fx.of(id); !slices.Equal(ran, []int{1, 2}) {
		t.Fatalf("the fork ran steps %v; want [1 2] (step 0 copied)", ran)
	}
	if names := stepNames(t, c, id); len(names) != 3 {
		t.Fatalf("the fork's steps: %v", names)
	}
	if got, err := c.Get(ctx, id); err != nil || got.ForkedFromID != source || got.ForkedFromStep != 1 {
		t.Fatalf("get the fork: %+v %v", got, err)
	}
	if got, err := c.Get(ctx, source); err != nil || got.ForkedFromID != "" || got.ForkedFromStep != 0 {
		t.Fatalf("the source is no fork: %+v %v", got, err)
	}
	// The same fork again (a resend after a lost reply) is the first one; an id anything else
	// holds is refused.
	again, err := c.Fork(ctx, source, waymark.ForkOptions{FromStep: waymark.FromStep(1), ID: id})
	if err != nil || again.ID != id || again.Status != waymark.StatusSuccess || again.ForkedFromID != source {
		t.Fatalf("the same fork again: %+v %v", again, err)
	}
	_, err = c.Fork(ctx, id, waymark.ForkOptions{ID: source})
	wantRefused(t, "a fork onto a used id", err, codes.AlreadyExists, "WORKFLOW_ID_CONFLICT")
	_, err = c.Fork(ctx, unique("missing"), waymark.ForkOptions{})
	wantRefused(t, "a fork of a workflow that never was", err, codes.NotFound, "WORKFLOW_NOT_FOUND")
}

// A step fails (no retries) and its workflow ends ERROR; the fix ships under the same app
// version, a fixed worker replacing the old one; resume reruns the failed step there, and the
// step before it is not run again.
func TestResumeRerunsTheFailedStepOfAnErrorWorkflow(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	version := unique("v")
	var fx effects
	fragile := func(fixed bool) func(waymark.Context, any) (string, error) {
		return func(ctx waymark.Context, _ any) (string, error) {
			if _, err := waymark.Step(ctx, "prepare", func(context.Context) (int, error) {
				fx.record(ctx.WorkflowID(), 0)
				return 0, nil
			}); err != nil {
				return "", err
			}
			return waymark.Step(ctx, "deliver", func(context.Context) (string, error) {
				fx.record(ctx.WorkflowID(), 1)
				if !fixed {
					return "", errors.New("a bug")
				}
				return "delivered", nil
			})
		}
	}
	buggy, queue := newWorker(t, waymark.WorkerOptions{AppVersion: version})
	waymark.RegisterWorkflow(buggy, "fragile", fragile(false))
	stopBuggy := runWorkerUntilStopped(t, buggy, queue)

	s, err := c.Start(ctx, "fragile", nil, &waymark.StartOptions{Queue: queue, AppVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	id := s.ID
	failed := await(t, c, id)
	if failed.Status != waymark.StatusError || failed.Failure == nil || !strings.Contains(failed.Failure.Message, "a bug") {
		t.Fatalf("the buggy run: %+v", failed)
	}

	stopBuggy()
	fixed, own := newWorker(t, waymark.WorkerOptions{AppVersion: version, Queues: []string{queue}})
	waymark.RegisterWorkflow(fixed, "fragile", fragile(true))
	runWorker(t, fixed, own)
	resumed, err := c.Resume(ctx, id)
	if err != nil || resumed.Status != waymark.StatusEnqueued || resumed.Failure != nil {
		t.Fatalf("resume: %+v %v", resumed, err)
	}
	rerun := await(t, c, id)
	if out, err := waymark.Output[string](rerun); err != nil || out != "delivered" || rerun.AppVersion != version {
		t.Fatalf("the rerun: %+v: %q %v", rerun, out, err)
	}
	if ran := fx.of(id); !slices.Equal(ran, []int{0, 1, 1}) {
		t.Fatalf("steps run %v; want [0 1 1] (prepare once, deliver again)", ran)
	}
	steps, err := c.Steps(ctx, id)
	if err != nil || len(steps) != 2 || steps[1].Failure != nil {
		t.Fatalf("the failed record was replaced: %+v %v", steps, err)
	}
}

// runWorkerUntilStopped runs w as runWorker does, and returns a stop that ends it (waiting
// for Run to return); the test's end stops it if stop was not called.
func runWorkerUntilStopped(t *testing.T, w *waymark.Worker, queue string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("worker did not stop")
			}
		})
	}
	t.Cleanup(stop)
	c := newClient(t)
	eventually(t, "the worker to connect", func() (bool, error) {
		_, err := c.GetQueue(testCtx(t), queue)
		return err == nil, err
	})
	return stop
}
