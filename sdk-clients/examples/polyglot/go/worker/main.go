// Command worker is the Go part of the polyglot example: it serves the remote step "reverse"
// (called by name from the Python workflow "combine") and runs the workflow "inbox", which
// waits for a message on topic "greeting" (sent by the Rust workflow "courier") and returns it.
//
//	WAYMARK_SERVER=127.0.0.1:7450 go run ./worker
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set (http://127.0.0.1:4317, say), its spans go to that
// OTLP/gRPC endpoint as service "polyglot-go" (see tracing.go).
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

const appName = "polyglot-go"

func main() {
	shutdownTracing, err := setupTracing(context.Background(), appName)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracing:", err)
		os.Exit(1)
	}
	w := waymark.NewWorker(waymark.WorkerOptions{AppName: appName, AppVersion: "1"})

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
	err = w.Run(ctx)
	// Run has returned, so every span of the worker has ended: flush them before exiting.
	flush, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ferr := shutdownTracing(flush); ferr != nil {
		fmt.Fprintln(os.Stderr, "tracing shutdown:", ferr)
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
