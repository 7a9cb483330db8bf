package waymark_test

import (
	"sync/atomic"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// conformance: queue_limits
// A queue's worker concurrency of 1 holds on a Go worker that has credits for ten.
func TestQueueLimitsHoldOnThisWorker(t *testing.T) {
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{AppVersion: "v1", MaxConcurrentWorkflows: 10})
	var running, most atomic.Int32
	waymark.RegisterWorkflow(w, "one_at_a_time", func(ctx waymark.Context, _ any) (int, error) {
		now := running.Add(1)
		for {
			seen := most.Load()
			if now <= seen || most.CompareAndSwap(seen, now) {
				break
			}
		}
		time.Sleep(50 * time.Millisecond) // holds its slot; not a wait for anything
		running.Add(-1)
		return 1, nil
	})
	runWorker(t, w, queue)
	one := uint32(1)
	if _, err := c.UpdateQueue(testCtx(t), queue, waymark.QueueLimits{WorkerConcurrency: &one}, waymark.FieldWorkerConcurrency); err != nil {
		t.Fatalf("update queue: %v", err)
	}
	var ids []string
	for i := 0; i < 6; i++ {
		ids = append(ids, start(t, c, "one_at_a_time", queue, nil))
	}
	for _, id := range ids {
		if out, err := waymark.Output[int](await(t, c, id)); err != nil || out != 1 {
			t.Fatalf("%s: output %d, %v", id, out, err)
		}
	}
	if most.Load() != 1 {
		t.Fatalf("%d ran at once on a queue limited to one per worker", most.Load())
	}
}
