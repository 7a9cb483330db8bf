// Command testworker is the worker process the crash test (and the continue-as-new test) kills
// with SIGKILL mid-workflow and then replaces with another. Each step of its workflows appends
// a line naming the step and the worker to the file SIDE_EFFECTS, so the test can count how
// often each step ran.
//
// Environment: WAYMARK_SERVER, WORKER_ID, WORKER_QUEUE, SIDE_EFFECTS, and PARK_AFTER (a Go
// duration; unset: never park).
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
	// By default the waiting workflow stays in this process (PENDING, leased to it) until it
	// dies.
	parkAfter := time.Duration(-1)
	if v := os.Getenv("PARK_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "PARK_AFTER:", err)
			os.Exit(2)
		}
		parkAfter = d
	}
	w := waymark.NewWorker(waymark.WorkerOptions{
		WorkerID:  workerID,
		Queues:    []string{os.Getenv("WORKER_QUEUE")},
		ParkAfter: parkAfter,
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
	// One run per n: (with wait) a message on "go", a step "tick" returning n, then n when it
	// reaches until, else continue as new with n + 1.
	waymark.RegisterWorkflow(w, "looper", func(ctx waymark.Context, in looper) (int, error) {
		if in.Wait {
			if _, _, err := waymark.Recv[any](ctx, "go", 10*time.Minute); err != nil {
				return 0, err
			}
		}
		n, err := waymark.Step(ctx, "tick", func(context.Context) (int, error) {
			return in.N, appendLine(effects, fmt.Sprintf("tick %d %s", in.N, workerID))
		})
		if err != nil {
			return 0, err
		}
		if n >= in.Until {
			return n, nil
		}
		next := in
		next.N = n + 1
		return 0, waymark.ContinueAsNew(next)
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type looper struct {
	N     int  `json:"n"`
	Until int  `json:"until"`
	Wait  bool `json:"wait"`
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
