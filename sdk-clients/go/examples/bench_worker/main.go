// Command bench_worker is the `make bench` worker: it registers workflow "bench", whose input is
// {"steps": K}; it runs K trivial checkpointed steps and returns K. It serves the queue in
// WAYMARK_QUEUE with WAYMARK_CAPACITY workflows at once, against WAYMARK_SERVER (waymark-bench's
// polyglot workload starts it and measures steps per second next to the Rust worker's).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

type input struct {
	Steps int `json:"steps"`
}

func main() {
	capacity, err := strconv.Atoi(os.Getenv("WAYMARK_CAPACITY"))
	if err != nil || capacity <= 0 {
		capacity = 1000
	}
	queue := os.Getenv("WAYMARK_QUEUE")
	if queue == "" {
		queue = "default"
	}
	w := waymark.NewWorker(waymark.WorkerOptions{
		AppName:                "waymark-bench",
		AppVersion:             "bench-1",
		Queues:                 []string{queue},
		MaxConcurrentWorkflows: uint32(capacity),
	})
	waymark.RegisterWorkflow(w, "bench", func(ctx waymark.Context, in input) (int, error) {
		for i := 0; i < in.Steps; i++ {
			got, err := waymark.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (int, error) { return i, nil })
			if err != nil {
				return 0, err
			}
			if got != i {
				return 0, waymark.Fail("WrongReplay", "step %d replayed as %d", i, got)
			}
		}
		return in.Steps, nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
