package waymark_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// A worker that loses a run without a word is found out by its heartbeats, which list what it
// holds: the server puts the workflow back in its queue at once, and it finishes, instead of
// staying PENDING for as long as the worker lives and renews its lease.
func TestLostRunIsTakenBackByTheServer(t *testing.T) {
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	var runs atomic.Int32
	afterLoss := make(chan error, 1)
	waymark.RegisterWorkflow(w, "forgotten", func(ctx waymark.Context, _ any) (string, error) {
		if runs.Add(1) == 1 {
			waymark.LoseRunSilently(ctx)
			_, err := waymark.Step(ctx, "after", func(context.Context) (int, error) { return 1, nil })
			afterLoss <- err
			// Never sent: the worker has let go of this run.
			return "lost", nil
		}
		return "found", nil
	})
	runWorker(t, w, queue)
	id := start(t, c, "forgotten", queue, nil)
	wf := await(t, c, id)
	out, err := waymark.Output[string](wf)
	if err != nil || out != "found" || runs.Load() != 2 || wf.Epoch != 2 || wf.RecoveryAttempts != 1 {
		t.Fatalf("output %q (%v) after %d runs; epoch %d, recovery attempts %d", out, err, runs.Load(), wf.Epoch, wf.RecoveryAttempts)
	}
	if err := <-afterLoss; !errors.Is(err, waymark.ErrDropped) {
		t.Fatalf("a step after the loss returned %v, want ErrDropped", err)
	}
	if names := stepNames(t, c, id); len(names) != 0 {
		t.Fatalf("the lost run recorded %v", names)
	}
}
