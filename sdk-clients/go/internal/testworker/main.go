// Command testworker is the worker process the crash test kills with SIGKILL mid-workflow and
// then replaces with another. Each step of its workflow appends a line naming the step and the
// worker to the file SIDE_EFFECTS, so the test can count how often each step ran.
//
// Environment: WAYMARK_SERVER, WORKER_ID, WORKER_QUEUE, SIDE_EFFECTS.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

func main() {
	workerID, effects := os.Getenv("WORKER_ID"), os.Getenv("SIDE_EFFECTS")
	w := waymark.NewWorker(waymark.WorkerOptions{
		WorkerID: workerID,
		Queues:   []string{os.Getenv("WORKER_QUEUE")},
		// The waiting workflow stays in this process (PENDING, leased to it) until it dies.
		ParkAfter: -1,
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	waymark.RegisterWorkflow(w, "crashy", func(ctx waymark.Context, steps int) (string, error) {
		for i := range steps {
			name := fmt.Sprintf("s-%d", i)
			if _, err := waymark.Step(ctx, name, func(context.Context) (string, error) {
				return workerID, appendLine(effects, name+" "+workerID)
			}); err != nil {
				return "", err
			}
			// Half way, wait for a message: the test kills the worker here.
			if i == steps/2 {
				if _, _, err := waymark.Recv[string](ctx, "go", 5*time.Minute); err != nil {
					return "", err
				}
			}
		}
		return workerID, nil
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
