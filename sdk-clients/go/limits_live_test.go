package waymark_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Sizes that agree end to end, against the real server at its default limits (4 MiB payloads,
// 9 MiB messages). A workflow that moves several payloads of 3 MiB — its input, two steps, its
// output — finishes on its first run, on one stream: no message the worker sends is refused,
// so the stream is never dropped and the workflow never dispatched again. One whose output is
// over the payload limit fails, once, with kind PAYLOAD_TOO_LARGE.
func TestLargePayloadsWithinTheLimits(t *testing.T) {
	const size = 3 << 20
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	welcomes := waymark.CountWelcomes(w)
	var runs atomic.Int32
	steps := []string{strings.Repeat("a", size), strings.Repeat("b", size)}
	waymark.RegisterWorkflow(w, "three-mib", func(ctx waymark.Context, input string) (string, error) {
		runs.Add(1)
		for i, name := range []string{"one", "two"} {
			if _, err := waymark.Step(ctx, name, func(context.Context) (string, error) { return steps[i], nil }); err != nil {
				return "", err
			}
		}
		return strings.ToUpper(input), nil
	})
	// The server's client API answers with at most a payload and 1 MiB more, too little for a
	// workflow carrying both a 3 MiB input and a 3 MiB output (or for its two 3 MiB steps): the
	// outcome is read by a workflow instead, which the worker stream carries.
	waymark.RegisterWorkflow(w, "watch", func(ctx waymark.Context, id string) (int, error) {
		out, err := waymark.AwaitChild[string](ctx, id)
		if err != nil {
			return 0, err
		}
		if out != strings.Repeat("I", size) {
			return 0, waymark.Fail("Mismatch", "the output (%d bytes) is not the input in capitals", len(out))
		}
		return len(out), nil
	})
	waymark.RegisterWorkflow(w, "five-mib", func(waymark.Context, any) (string, error) {
		return strings.Repeat("f", 5<<20), nil
	})
	runWorker(t, w, queue)

	id := start(t, c, "three-mib", queue, strings.Repeat("i", size))
	watched := await(t, c, start(t, c, "watch", queue, id))
	if n, err := waymark.Output[int](watched); err != nil || n != size || runs.Load() != 1 {
		t.Fatalf("output of %d bytes (%v) after %d runs", n, err, runs.Load())
	}

	id = start(t, c, "five-mib", queue, nil)
	wf := await(t, c, id)
	if wf.Status != waymark.StatusError || wf.Failure == nil || wf.Failure.Kind != "PAYLOAD_TOO_LARGE" || wf.RecoveryAttempts != 0 {
		t.Fatalf("%s with failure %+v; recovery attempts %d", wf.Status, wf.Failure, wf.RecoveryAttempts)
	}
	if n := welcomes(); n != 1 {
		t.Fatalf("the worker was welcomed %d times: it reconnected", n)
	}
}
