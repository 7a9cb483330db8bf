package waymark_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// drawn is what the workflow of TestNowAndUUIDSurviveARerun read, in its output.
type drawn struct {
	Now  time.Time `json:"now"`
	UUID string    `json:"uuid"`
}

// A workflow reads Now and UUID, its run is lost after their records are durable, and the
// server dispatches it again: the second run replays both from the history the real server
// recorded and gets the values the first run drew, though its own clock has moved on. The
// server keeps them in worker.proto's shapes.
func TestNowAndUUIDSurviveARerun(t *testing.T) {
	c := newClient(t)
	w, queue := newWorker(t, waymark.WorkerOptions{})
	runs := make(chan drawn, 2)
	// When the second run began, by the worker's clock: a live Now would read at least this.
	var rerunAt time.Time
	waymark.RegisterWorkflow(w, "draws", func(ctx waymark.Context, _ any) (drawn, error) {
		first := ctx.RecoveryAttempts() == 0
		if !first {
			rerunAt = time.Now()
		}
		now, err := waymark.Now(ctx)
		if err != nil {
			return drawn{}, err
		}
		id, err := waymark.UUID(ctx)
		if err != nil {
			return drawn{}, err
		}
		// A step flushes the records held before it, so both are durable when it has run.
		if _, err := waymark.Step(ctx, "after", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return drawn{}, err
		}
		d := drawn{Now: now, UUID: id}
		select {
		case runs <- d:
		default: // a third run (a test failing) must not block the worker
		}
		if first {
			// The worker forgets the run; its heartbeat no longer lists it, so the server
			// dispatches it again (see TestLostRunIsTakenBackByTheServer).
			waymark.LoseRunSilently(ctx)
		}
		return d, nil
	})
	runWorker(t, w, queue)
	id := start(t, c, "draws", queue, nil)
	wf := await(t, c, id)
	if wf.Status != waymark.StatusSuccess || wf.RecoveryAttempts != 1 || wf.Epoch != 2 {
		t.Fatalf("%s (%v) at epoch %d, recovery attempts %d; want a success on the second run", wf.Status, wf.Failure, wf.Epoch, wf.RecoveryAttempts)
	}
	// Both runs got past their step: the second one succeeded.
	first, second := <-runs, <-runs
	if first.Now.Location() != time.UTC || first.Now.UnixMilli() >= rerunAt.UnixMilli() {
		t.Fatalf("first Now %v; the rerun began at %v", first.Now, rerunAt)
	}
	if second != first {
		t.Fatalf("the rerun read %+v; the first run %+v", second, first)
	}
	out, err := waymark.Output[drawn](wf)
	if err != nil || !out.Now.Equal(first.Now) || out.UUID != first.UUID {
		t.Fatalf("output %+v (%v); drawn %+v", out, err, first)
	}

	steps, err := c.Steps(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf(`waymark.now {"now_ms":%d}`, first.Now.UnixMilli()),
		fmt.Sprintf(`waymark.uuid {"uuid":%q}`, first.UUID),
		`after 1`,
	}
	var got []string
	for _, s := range steps {
		got = append(got, s.Name+" "+string(compactJSON(t, s.Output)))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
}

// compactJSON is raw without insignificant whitespace, for comparing recorded shapes.
func compactJSON(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("recorded %q: %v", raw, err)
	}
	return b.Bytes()
}
