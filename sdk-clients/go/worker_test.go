package waymark_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

type order struct {
	Item  string `json:"item"`
	Count int    `json:"count"`
}

type receipt struct {
	Total int    `json:"total"`
	By    string `json:"by"`
}

func TestWorkflowWithStepsCompletes(t *testing.T) {
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{AppVersion: "v1"})
	var runs atomic.Int32
	waymark.RegisterWorkflow(w, "checkout", func(ctx waymark.Context, o order) (receipt, error) {
		price, err := waymark.Step(ctx, "price", func(context.Context) (int, error) {
			runs.Add(1)
			return 7, nil
		})
		if err != nil {
			return receipt{}, err
		}
		return waymark.Step(ctx, "charge", func(context.Context) (receipt, error) {
			runs.Add(1)
			return receipt{Total: price * o.Count, By: ctx.WorkflowName()}, nil
		})
	})
	runWorker(t, w, queue)
	id := start(t, c, "checkout", queue, order{Item: "tea", Count: 3})
	wf := await(t, c, id)
	got, err := waymark.Output[receipt](wf)
	if err != nil || got != (receipt{Total: 21, By: "checkout"}) {
		t.Fatalf("output %+v, %v (workflow %+v)", got, err, wf)
	}
	if names := stepNames(t, c, id); fmt.Sprint(names) != "[price charge]" {
		t.Fatalf("steps %v", names)
	}
	if runs.Load() != 2 || wf.AppVersion != "v1" {
		t.Fatalf("ran %d step functions; app version %q", runs.Load(), wf.AppVersion)
	}
}

func TestStepRetriesThenFailsTheWorkflow(t *testing.T) {
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	var flaky, doomed atomic.Int32
	retry := waymark.WithRetry(waymark.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Millisecond})
	waymark.RegisterWorkflow(w, "flaky", func(ctx waymark.Context, _ any) (string, error) {
		v, err := waymark.Step(ctx, "flaky", func(context.Context) (string, error) {
			if flaky.Add(1) < 3 {
				return "", errors.New("not yet")
			}
			return "done", nil
		}, retry)
		if err != nil {
			return "", err
		}
		_, err = waymark.Step(ctx, "doomed", func(context.Context) (int, error) {
			doomed.Add(1)
			return 0, errors.New("card declined")
		}, retry)
		var stepErr *waymark.StepError
		if !errors.As(err, &stepErr) || stepErr.Step != "doomed" {
			return "", fmt.Errorf("want a StepError, got %w", err)
		}
		return v, err
	})
	runWorker(t, w, queue)
	id := start(t, c, "flaky", queue, nil)
	wf := await(t, c, id)
	if wf.Status != waymark.StatusError || wf.Failure.Kind != "StepFailed" || flaky.Load() != 3 || doomed.Load() != 3 {
		t.Fatalf("workflow %+v failure %+v; flaky ran %d, doomed %d", wf, wf.Failure, flaky.Load(), doomed.Load())
	}
	steps, err := c.Steps(testCtx(t), id)
	if err != nil || len(steps) != 2 || steps[0].Attempts != 3 || steps[1].Failure == nil || steps[1].Failure.Message != "card declined" {
		t.Fatalf("steps %+v %v", steps, err)
	}
	var f *waymark.Failure
	if err := wf.Result(nil); !errors.As(err, &f) || f.Kind != "StepFailed" {
		t.Fatalf("Result: %v", err)
	}
}

// A step the worker ran carries how long it took: the server dates its start from it. A
// built-in record (a drawn UUID) runs no function and has none.
func TestStepCarriesItsStart(t *testing.T) {
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "timed", func(ctx waymark.Context, _ any) (string, error) {
		if _, err := waymark.UUID(ctx); err != nil {
			return "", err
		}
		return waymark.Step(ctx, "slow", func(context.Context) (string, error) {
			time.Sleep(200 * time.Millisecond)
			return "done", nil
		})
	})
	runWorker(t, w, queue)
	id := start(t, c, "timed", queue, nil)
	if wf := await(t, c, id); wf.Status != waymark.StatusSuccess {
		t.Fatalf("workflow %+v failure %+v", wf, wf.Failure)
	}
	steps, err := c.Steps(testCtx(t), id)
	if err != nil || len(steps) != 2 {
		t.Fatalf("steps %+v %v", steps, err)
	}
	if drawn := steps[0]; drawn.Name != "waymark.uuid" || !drawn.StartedAt.IsZero() {
		t.Fatalf("drawn uuid %+v: want no start", drawn)
	}
	step := steps[1]
	if step.Name != "slow" || step.StartedAt.IsZero() || step.RecordedAt.IsZero() {
		t.Fatalf("step %+v: want a start and a record time", step)
	}
	// At least the sleep: the server dates the start from the duration the worker measured.
	if took := step.RecordedAt.Sub(step.StartedAt); took < 200*time.Millisecond || took >= time.Minute {
		t.Fatalf("step %q took %v from its start to its record (started %v, recorded %v)", step.Name, took, step.StartedAt, step.RecordedAt)
	}
}

func TestWorkflowFailsWithItsOwnKind(t *testing.T) {
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "picky", func(ctx waymark.Context, n int) (int, error) {
		if n < 0 {
			return 0, waymark.Fail("NegativeInput", "got %d", n)
		}
		return n, nil
	})
	runWorker(t, w, queue)
	wf := await(t, c, start(t, c, "picky", queue, -2))
	if wf.Status != waymark.StatusError || *wf.Failure != (waymark.Failure{Kind: "NegativeInput", Message: "got -2"}) {
		t.Fatalf("workflow %+v failure %+v", wf, wf.Failure)
	}
}

// A replayed workflow returns recorded steps without running them: a second dispatch (after a
// resume) runs only what was not recorded.
// conformance: durable_steps
func TestReplayRunsRecordedStepsOnce(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	var first, second atomic.Int32
	waymark.RegisterWorkflow(w, "twice", func(ctx waymark.Context, _ any) (int, error) {
		a, err := waymark.Step(ctx, "first", func(context.Context) (int, error) { return int(first.Add(1)), nil })
		if err != nil {
			return 0, err
		}
		// Waits for a message: cancelled here, then resumed, the workflow replays "first".
		if _, _, err := waymark.Recv[string](ctx, "go", time.Hour); err != nil {
			return 0, err
		}
		b, err := waymark.Step(ctx, "second", func(context.Context) (int, error) { return int(second.Add(1)), nil })
		return a*10 + b, err
	})
	runWorker(t, w, queue)
	id := start(t, c, "twice", queue, nil)
	eventually(t, "the workflow to wait for its message", func() (bool, error) {
		names := stepNames(t, c, id)
		return len(names) == 2, nil
	})
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, id, "go", "now", nil); err != nil {
		t.Fatal(err)
	}
	wf := await(t, c, id)
	if out, err := waymark.Output[int](wf); err != nil || out != 11 || first.Load() != 1 || second.Load() != 1 {
		t.Fatalf("output %d %v; first ran %d, second %d", out, err, first.Load(), second.Load())
	}
}

// conformance: cancel
func TestCancelStopsARunningWorkflow(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	stopped := make(chan error, 1)
	waymark.RegisterWorkflow(w, "long", func(ctx waymark.Context, _ any) (any, error) {
		// A step that runs until its context ends: cancel reaches it.
		_, err := waymark.Step(ctx, "block", func(sctx context.Context) (int, error) {
			<-sctx.Done()
			return 0, sctx.Err()
		})
		stopped <- context.Cause(ctx)
		return nil, err
	})
	runWorker(t, w, queue)
	id := start(t, c, "long", queue, nil)
	eventually(t, "the workflow to run", func() (bool, error) {
		wf, err := c.Get(ctx, id)
		return err == nil && wf.Status == waymark.StatusPending, err
	})
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-stopped:
		if !errors.Is(cause, waymark.ErrCancelled) {
			t.Fatalf("cause %v", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the workflow did not stop")
	}
	if wf := await(t, c, id); wf.Status != waymark.StatusCancelled || len(stepNames(t, c, id)) != 0 {
		t.Fatalf("workflow %+v steps %v", wf, stepNames(t, c, id))
	}
}

func TestWorkflowTimeoutCancelsIt(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	waymark.RegisterWorkflow(w, "slow", func(ctx waymark.Context, _ any) (any, error) {
		_, _, err := waymark.Recv[any](ctx, "never", time.Hour)
		return nil, err
	})
	runWorker(t, w, queue)
	s, err := c.Start(ctx, "slow", nil, &waymark.StartOptions{Queue: queue, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if wf := await(t, c, s.ID); wf.Status != waymark.StatusCancelled {
		t.Fatalf("workflow %+v", wf)
	}
}

// A replay that calls a different step than the history records fails the workflow with kind
// NonDeterminism.
func TestNonDeterminismFailsTheWorkflow(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	var runs atomic.Int32
	waymark.RegisterWorkflow(w, "fickle", func(ctx waymark.Context, _ any) (any, error) {
		name := "first-run"
		if runs.Add(1) > 1 {
			name = "later-run"
		}
		if _, err := waymark.Step(ctx, name, func(context.Context) (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		_, _, err := waymark.Recv[any](ctx, "", time.Hour)
		return nil, err
	})
	runWorker(t, w, queue)
	id := start(t, c, "fickle", queue, nil)
	eventually(t, "the first run to wait", func() (bool, error) { return len(stepNames(t, c, id)) == 2, nil })
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	wf := await(t, c, id)
	if wf.Status != waymark.StatusError || wf.Failure.Kind != "NonDeterminism" {
		t.Fatalf("workflow %+v failure %+v", wf, wf.Failure)
	}
}

// With room for one workflow, the server dispatches the second only once the first is done
// and its credit granted back.
func TestCreditsBoundWhatRunsAtOnce(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{MaxConcurrentWorkflows: 1})
	waymark.RegisterWorkflow(w, "gate", func(ctx waymark.Context, _ any) (string, error) {
		m, _, err := waymark.Recv[string](ctx, "", time.Minute)
		return m, err
	})
	runWorker(t, w, queue)
	a, b := start(t, c, "gate", queue, nil), start(t, c, "gate", queue, nil)
	running := func() (string, string) {
		wa, _ := c.Get(ctx, a)
		wb, _ := c.Get(ctx, b)
		if wa.Status == waymark.StatusPending && len(stepNames(t, c, a)) > 0 {
			return a, b
		}
		if wb.Status == waymark.StatusPending && len(stepNames(t, c, b)) > 0 {
			return b, a
		}
		return "", ""
	}
	var first, second string
	eventually(t, "one workflow to run", func() (bool, error) {
		first, second = running()
		return first != "", nil
	})
	if wf, _ := c.Get(ctx, second); wf.Status != waymark.StatusEnqueued {
		t.Fatalf("the second workflow is %s while the first runs", wf.Status)
	}
	for _, id := range []string{first, second} {
		if _, err := c.Send(ctx, id, "", id, nil); err != nil {
			t.Fatal(err)
		}
		if out, err := waymark.Output[string](await(t, c, id)); err != nil || out != id {
			t.Fatalf("%s: %q %v", id, out, err)
		}
	}
}

// A registration the server refuses is not retried forever: Run returns the reason.
func TestRunReturnsARefusedRegistration(t *testing.T) {
	w := waymark.NewWorker(waymark.WorkerOptions{Server: server.addr, WorkerID: string(make([]byte, 300)), Logger: testLogger(t)})
	waymark.RegisterWorkflow(w, "any", func(waymark.Context, any) (any, error) { return nil, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := w.Run(ctx)
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Reason != "INVALID_ARGUMENT" {
		t.Fatalf("want INVALID_ARGUMENT, got %v", err)
	}
}

// Heartbeats keep a worker's lease (3 s on the test server): a workflow held in memory longer
// than that is neither recovered nor dispatched again.
func TestHeartbeatsKeepTheLease(t *testing.T) {
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{ParkAfter: -1})
	waymark.RegisterWorkflow(w, "hold", func(ctx waymark.Context, _ any) (any, error) {
		return nil, waymark.Sleep(ctx, 4*time.Second)
	})
	runWorker(t, w, queue)
	wf := await(t, c, start(t, c, "hold", queue, nil))
	if wf.Status != waymark.StatusSuccess || wf.RecoveryAttempts != 0 || wf.Epoch != 1 {
		t.Fatalf("workflow %+v", wf)
	}
}
