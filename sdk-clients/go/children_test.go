package waymark_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// conformance: child_workflows
func TestChildWorkflows(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "square", func(ctx waymark.Context, n int) (int, error) {
		if n < 0 {
			return 0, waymark.Fail("Negative", "%d", n)
		}
		if n == 0 { // waits until cancelled
			_, _, err := waymark.Recv[any](ctx, "never", time.Hour)
			return 0, err
		}
		return n * n, nil
	})
	on := &waymark.ChildOptions{Queue: queue}
	waymark.RegisterWorkflow(w, "parent", func(ctx waymark.Context, _ any) (string, error) {
		// Without a queue, the child runs on its parent's.
		a, err := waymark.RunChild[int](ctx, "square", 3, nil)
		if err != nil {
			return "", err
		}
		// Started together, waited for together.
		slow, err := waymark.StartChild(ctx, "square", 0, &waymark.ChildOptions{ID: ctx.WorkflowID() + "-slow", Queue: queue})
		if err != nil {
			return "", err
		}
		fast, err := waymark.StartChild(ctx, "square", 4, on)
		if err != nil {
			return "", err
		}
		first, err := waymark.WaitFirst(ctx, waymark.WorkflowRef(slow), waymark.WorkflowRef(fast))
		if err != nil {
			return "", err
		}
		b, err := waymark.AwaitChild[int](ctx, fast)
		if err != nil {
			return "", err
		}
		bad, err := waymark.StartChild(ctx, "square", -1, on)
		if err != nil {
			return "", err
		}
		if err := waymark.WaitAll(ctx, waymark.WorkflowRef(bad), waymark.WorkflowRef(fast)); err != nil {
			return "", err
		}
		_, err = waymark.AwaitChild[int](ctx, bad)
		var f *waymark.Failure
		if !errors.As(err, &f) || f.Kind != "ChildFailed" {
			return "", fmt.Errorf("want ChildFailed, got %w", err)
		}
		return fmt.Sprintf("%d %d %d %s", a, first, b, slow), nil
	})
	runWorker(t, w, queue)
	id := start(t, c, "parent", queue, nil)
	wf := await(t, c, id)
	out, err := waymark.Output[string](wf)
	if err != nil || out != fmt.Sprintf("9 1 16 %s-slow", id) {
		t.Fatalf("output %q (%v) failure %+v", out, err, wf.Failure)
	}
	child, err := c.Get(ctx, id+"-slow")
	if err != nil || child.ParentID != id {
		t.Fatalf("child %+v %v", child, err)
	}
	if _, err := c.CancelTree(ctx, id); err != nil {
		t.Fatal(err)
	}
	if wf := await(t, c, id+"-slow"); wf.Status != waymark.StatusCancelled {
		t.Fatalf("slow child after cancel: %+v", wf)
	}
}

func TestRemoteSteps(t *testing.T) {
	c := newClient(t)
	// One worker serves the steps, another runs the workflow that calls them.
	steps, stepQueue := newWorker(t, waymark.WorkerOptions{})
	attempts := map[string]int{}
	waymark.RegisterStep(steps, "double", func(ctx context.Context, n int) (int, error) {
		return 2 * n, nil
	})
	waymark.RegisterStep(steps, "flaky", func(ctx context.Context, key string) (string, error) {
		attempts[key]++ // attempts of one call run one after another
		if attempts[key] < 2 {
			return "", errors.New("try again")
		}
		return key + " ok", nil
	})
	waymark.RegisterStep(steps, "broken", func(ctx context.Context, _ any) (any, error) {
		return nil, errors.New("always")
	})
	runWorker(t, steps, stepQueue)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	fast := waymark.WithRetry(waymark.RetryPolicy{MaxAttempts: 3, InitialInterval: 10 * time.Millisecond})
	waymark.RegisterWorkflow(w, "caller", func(ctx waymark.Context, n int) (string, error) {
		d, err := waymark.CallStep[int](ctx, "double", n)
		if err != nil {
			return "", err
		}
		a, err := waymark.StartStep(ctx, "flaky", "a", fast, waymark.WithTimeout(time.Minute))
		if err != nil {
			return "", err
		}
		b, err := waymark.StartStep(ctx, "double", d)
		if err != nil {
			return "", err
		}
		if err := waymark.WaitAll(ctx, a, b); err != nil {
			return "", err
		}
		ra, err := waymark.StepResult[string](ctx, a)
		if err != nil {
			return "", err
		}
		rb, err := waymark.StepResult[int](ctx, b)
		if err != nil {
			return "", err
		}
		_, err = waymark.CallStep[any](ctx, "broken", nil, waymark.WithRetry(waymark.RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond}))
		var stepErr *waymark.StepError
		if !errors.As(err, &stepErr) {
			return "", fmt.Errorf("want a StepError, got %w", err)
		}
		return fmt.Sprintf("%d %s %d", d, ra, rb), nil
	})
	runWorker(t, w, queue)
	wf := await(t, c, start(t, c, "caller", queue, 5))
	if out, err := waymark.Output[string](wf); err != nil || out != "10 a ok 20" {
		t.Fatalf("output %q (%v) failure %+v", out, err, wf.Failure)
	}
	steps2, err := c.Steps(testCtx(t), wf.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps2 {
		if s.Name == "flaky" && s.Attempts != 2 {
			t.Fatalf("flaky took %d attempts", s.Attempts)
		}
	}
}
