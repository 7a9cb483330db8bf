package waymark_test

import (
	"context"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Every kind of wait parks past the threshold — a recv, a child, a remote step — and the
// workflow is dispatched again when the wait resolves, replaying to it.
func TestWaitsParkAndResume(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	w, queue := newWorker(t, waymark.WorkerOptions{ParkAfter: time.Millisecond})
	release := make(chan struct{})
	waymark.RegisterStep(w, "gated", func(ctx context.Context, n int) (int, error) {
		select {
		case <-release:
			return n + 1, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	waymark.RegisterWorkflow(w, "child", func(ctx waymark.Context, _ any) (string, error) {
		m, _, err := waymark.Recv[string](ctx, "", time.Minute)
		return m, err
	})
	waymark.RegisterWorkflow(w, "patient", func(ctx waymark.Context, childID string) (int, error) {
		id, err := waymark.StartChild(ctx, "child", nil, &waymark.ChildOptions{ID: childID})
		if err != nil {
			return 0, err
		}
		if _, err := waymark.AwaitChild[string](ctx, id); err != nil {
			return 0, err
		}
		return waymark.CallStep[int](ctx, "gated", 41)
	})
	runWorker(t, w, queue)
	childID := unique("child")
	id := start(t, c, "patient", queue, childID)
	parked := func(id string) func() (bool, error) {
		return func() (bool, error) {
			wf, err := c.Get(ctx, id)
			return err == nil && wf.Status == waymark.StatusDelayed, err
		}
	}
	eventually(t, "the child to park in its recv", parked(childID))
	eventually(t, "the parent to park awaiting its child", parked(id))
	if _, err := c.Send(ctx, childID, "", "hi", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the parent to park on its remote step", func() (bool, error) {
		names := stepNames(t, c, id)
		wf, err := c.Get(ctx, id)
		return err == nil && len(names) == 2 && wf.Status == waymark.StatusDelayed, err
	})
	close(release)
	wf := await(t, c, id)
	if out, err := waymark.Output[int](wf); err != nil || out != 42 || wf.Epoch < 3 {
		t.Fatalf("output %d (%v); epoch %d", out, err, wf.Epoch)
	}
}
