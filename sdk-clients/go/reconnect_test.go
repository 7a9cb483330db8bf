package waymark_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// The server dies (SIGKILL) under a worker that is running a workflow and comes back on the
// same address and database: the worker reconnects by itself, gets the workflow again and
// finishes it without running its recorded step again.
func TestWorkerReconnectsAfterTheServerRestarts(t *testing.T) {
	own, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { own.stop() })
	c, err := waymark.NewClient(own.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	queue := unique("q")
	w := waymark.NewWorker(waymark.WorkerOptions{Server: own.addr, Queues: []string{queue}, Logger: testLogger(t)})
	var ran atomic.Int32
	waymark.RegisterWorkflow(w, "patient", func(ctx waymark.Context, _ any) (string, error) {
		if _, err := waymark.Step(ctx, "once", func(context.Context) (int32, error) { return ran.Add(1), nil }); err != nil {
			return "", err
		}
		msg, _, err := waymark.Recv[string](ctx, "", time.Minute)
		return msg, err
	})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	eventually(t, "the worker to connect", func() (bool, error) {
		_, err := c.GetQueue(ctx, queue)
		return err == nil, err
	})
	s, err := c.Start(ctx, "patient", nil, &waymark.StartOptions{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the workflow to wait", func() (bool, error) {
		return len(stepNames(t, c, s.ID)) == 2, nil
	})

	own.kill()
	again, err := startServerAt(own.dir, own.addr)
	if err != nil {
		t.Fatal(err)
	}
	*own = *again // the same server, come back
	if _, err := c.Send(ctx, s.ID, "", "welcome back", nil); err != nil {
		t.Fatal(err)
	}
	wf, err := c.Await(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := waymark.Output[string](wf); err != nil || out != "welcome back" || ran.Load() != 1 {
		t.Fatalf("output %q (%v); the step ran %d times", out, err, ran.Load())
	}
}
