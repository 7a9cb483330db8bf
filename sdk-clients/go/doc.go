// Package waymark is the Go SDK of Waymark, a durable-execution control plane: a Worker runs
// workflow functions whose steps are checkpointed by the server, so a workflow survives the
// crash of the process running it; a Client starts workflows and watches them.
//
// A workflow is a plain function registered on a worker:
//
//	w := waymark.NewWorker(waymark.WorkerOptions{})
//	waymark.RegisterWorkflow(w, "greet", func(ctx waymark.Context, name string) (string, error) {
//		// The function may run again on replay; the step's result is recorded once.
//		return waymark.Step(ctx, "compose", func(ctx context.Context) (string, error) {
//			return "Hello, " + name + "!", nil
//		})
//	})
//	err := w.Run(ctx)
//
// Values travel as JSON (encoding/json), so workers in every language read each other's.
// Every program finds the server from WAYMARK_SERVER when no address is given, defaulting to
// 127.0.0.1:7450.
package waymark

import (
	"os"
	"strings"
)

// DefaultServer is the address used when none is given: WAYMARK_SERVER, else 127.0.0.1:7450.
func DefaultServer() string {
	if s := strings.TrimSpace(os.Getenv("WAYMARK_SERVER")); s != "" {
		return s
	}
	return "127.0.0.1:7450"
}

// target turns "http://host:port" (the form the Rust SDK and the CLI take) into the host:port
// grpc-go dials, so one WAYMARK_SERVER value works for every SDK.
func target(addr string) string {
	if addr == "" {
		addr = DefaultServer()
	}
	for _, scheme := range []string{"http://", "https://"} {
		addr = strings.TrimPrefix(addr, scheme)
	}
	return strings.TrimSuffix(addr, "/")
}
