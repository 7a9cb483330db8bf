// Command worker is the Go part of the polyglot example: it serves the remote step "reverse"
// (called by name from the Python workflow "combine") and runs the workflow "inbox", which
// waits for a message on topic "greeting" (sent by the Rust workflow "courier") and returns it.
//
//	WAYMARK_SERVER=127.0.0.1:7450 go run ./worker
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

func main() {
	w := waymark.NewWorker(waymark.WorkerOptions{AppName: "polyglot-go", AppVersion: "1"})

	// A remote step: any workflow, in any language, calls it by name.
	waymark.RegisterStep(w, "reverse", func(_ context.Context, s string) (string, error) {
		r := []rune(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		return string(r), nil
	})

	// A workflow that receives a message: the wait is durable, and the message is taken once.
	waymark.RegisterWorkflow(w, "inbox", func(ctx waymark.Context, _ any) (string, error) {
		msg, ok, err := waymark.Recv[string](ctx, "greeting", 10*time.Minute)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", waymark.Fail("NoMessage", "no greeting came within ten minutes")
		}
		ctx.Logger().Info("received", "message", msg)
		return msg, nil
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := w.Run(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
