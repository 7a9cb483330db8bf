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
// 127.0.0.1:7450; an https:// address (or any TLS option) makes the connection TLS, and an API
// key (APIKey, or WAYMARK_API_KEY) is sent on every call — over plaintext only to a loopback
// host unless Insecure (or WAYMARK_INSECURE=1) says so. See ClientOptions and WorkerOptions.
package waymark

import (
	"os"
	"strings"
)

// DefaultServer is the address used when none is given: WAYMARK_SERVER, else 127.0.0.1:7450.
// It may be "host:port", "http://host:port" (plaintext) or "https://host:port" (TLS): the form
// the Rust SDK and the CLI take, so one WAYMARK_SERVER value works for every SDK.
func DefaultServer() string {
	if s := strings.TrimSpace(os.Getenv("WAYMARK_SERVER")); s != "" {
		return s
	}
	return "127.0.0.1:7450"
}
