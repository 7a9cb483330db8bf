package waymark

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Tests of what a worker does when the server cannot take its writes: an UNAVAILABLE answer
// (the database restarting) or a stream that breaks is never the workflow's failure.

// endedRuns reports, on the channel it returns, each run that leaves w.
func endedRuns(w *Worker) <-chan string {
	ch := make(chan string, 16)
	w.hooks.runEnded = func(id string) { ch <- id }
	return ch
}

func waitEnded(t *testing.T, ended <-chan string, id string) {
	t.Helper()
	select {
	case got := <-ended:
		if got != id {
			t.Fatalf("run %s ended, want %s", got, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run %s did not end", id)
	}
}

// Every request answered UNAVAILABLE is sent again, the same, until it goes through; the
// workflow never sees the refusals and completes as if there had been none.
func TestUnavailableIsResentUntilItGoesThrough(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	var aRuns, bRuns atomic.Int32
	RegisterWorkflow(w, "steady", func(ctx Context, _ any) (int, error) {
		a, err := Step(ctx, "a", func(context.Context) (int, error) { aRuns.Add(1); return 20, nil })
		if err != nil {
			return 0, err
		}
		if _, err := Send(ctx, "elsewhere", "", "hi"); err != nil {
			return 0, err
		}
		return Step(ctx, "b", func(context.Context) (int, error) { bRuns.Add(1); return a + 1, nil })
	})
	// Two refusals of a's record, one of the send, one of the completion.
	refusals := map[string]int{"record": 2, "send": 1, "complete": 1}
	f := startFake(t, w, func(m *pb.WorkerMessage) *pb.Reply {
		if k := kindOf(m); refusals[k] > 0 {
			refusals[k]--
			return unavailableReply()
		}
		return okReply(m)
	})
	f.dispatch("wf-1", "steady")
	waitEnded(t, ended, "wf-1")

	msgs := f.messages()
	recs := records(msgs)
	if len(recs) != 3 || !proto.Equal(recs[0], recs[1]) || !proto.Equal(recs[1], recs[2]) || recs[0].GetName() != "a" {
		t.Fatalf("want a's record sent three times, the same each time; got %v", recs)
	}
	var sends int
	for _, m := range msgs {
		if kindOf(m) == "send" {
			sends++
		}
	}
	done := completions(msgs)
	if sends != 2 || len(done) != 2 || !proto.Equal(done[0], done[1]) {
		t.Fatalf("want the send and the completion sent twice each, the same; got %d sends, completions %v", sends, done)
	}
	if out, _ := payloadJSON(done[1].GetOutput()); string(out) != "21" || len(done[1].GetSteps()) != 1 || done[1].GetSteps()[0].GetName() != "b" {
		t.Fatalf("completion %v", done[1])
	}
	if aRuns.Load() != 1 || bRuns.Load() != 1 {
		t.Fatalf("a ran %d times, b %d", aRuns.Load(), bRuns.Load())
	}
	if creditsBack(msgs) != 1 {
		t.Fatalf("the run's credit was granted back %d times", creditsBack(msgs))
	}
}

// Past WorkerOptions.RetryUnavailable the run is dropped: its step returns ErrDropped, and
// nothing more is sent for it — no completion, no failure — but its credit, granted back as
// for any run that ends.
func TestUnavailablePastTheBoundDropsTheRun(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{RetryUnavailable: 300 * time.Millisecond})
	ended := endedRuns(w)
	stepErr := make(chan error, 1)
	RegisterWorkflow(w, "doomed", func(ctx Context, _ any) (any, error) {
		if _, err := Step(ctx, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		_, err := Step(ctx, "b", func(context.Context) (int, error) { return 2, nil })
		stepErr <- err
		return nil, err
	})
	f := startFake(t, w, func(m *pb.WorkerMessage) *pb.Reply {
		if m.GetRecordStep() != nil {
			return unavailableReply()
		}
		return okReply(m)
	})
	f.dispatch("wf-2", "doomed")
	waitEnded(t, ended, "wf-2")

	err := <-stepErr
	var last *Error
	if !errors.Is(err, ErrDropped) || !errors.As(err, &last) || last.Code != codes.Unavailable || last.Reason != "STORE_UNAVAILABLE" {
		t.Fatalf("step b returned %v, want ErrDropped wrapping the last UNAVAILABLE", err)
	}
	assertDropped(t, f.messages(), "a")
}

// assertDropped checks that a dropped run sent nothing but its one step's records (sent again
// while UNAVAILABLE) and its credit: no other request, no completion.
func assertDropped(t *testing.T, msgs []*pb.WorkerMessage, step string) {
	t.Helper()
	for _, m := range requests(msgs) {
		if m.GetRecordStep().GetName() != step {
			t.Fatalf("a dropped run sent %v", m)
		}
	}
	if len(records(msgs)) < 2 {
		t.Fatalf("want %s's record sent again at least once before the drop; sent %v", step, msgs)
	}
	if n := creditsBack(msgs); n != 1 {
		t.Fatalf("the run's credit was granted back %d times", n)
	}
}

// A workflow that swallows ErrDropped cannot go on: every later operation fails the same
// way, step functions do not run, nothing is sent, and what it returns is not completed.
func TestDroppedRunCannotGoOnOrComplete(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{RetryUnavailable: 300 * time.Millisecond})
	ended := endedRuns(w)
	var (
		mu     sync.Mutex
		errs   []error
		cause  error
		cRan   atomic.Bool
		record = func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	)
	RegisterWorkflow(w, "stubborn", func(ctx Context, _ any) (string, error) {
		_, _ = Step(ctx, "a", func(context.Context) (int, error) { return 1, nil })
		_, err := Step(ctx, "b", func(context.Context) (int, error) { return 2, nil })
		record(err) // ignored from here on
		_, err = Step(ctx, "c", func(context.Context) (int, error) { cRan.Store(true); return 3, nil })
		record(err)
		_, err = Send(ctx, "elsewhere", "", "hi")
		record(err)
		record(SetEvent(ctx, "k", 1))
		record(Sleep(ctx, time.Millisecond))
		mu.Lock()
		cause = context.Cause(ctx)
		mu.Unlock()
		return "finished anyway", nil
	})
	f := startFake(t, w, func(m *pb.WorkerMessage) *pb.Reply {
		if m.GetRecordStep() != nil {
			return unavailableReply()
		}
		return okReply(m)
	})
	f.dispatch("wf-3", "stubborn")
	waitEnded(t, ended, "wf-3")

	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 5 {
		t.Fatalf("errors %v", errs)
	}
	for i, err := range errs {
		if !errors.Is(err, ErrDropped) || err.Error() != errs[0].Error() {
			t.Fatalf("operation %d after the drop returned %v, want %v", i, err, errs[0])
		}
	}
	if !errors.Is(cause, ErrDropped) || cRan.Load() {
		t.Fatalf("context cause %v; c's function ran: %v", cause, cRan.Load())
	}
	assertDropped(t, f.messages(), "a")
}

// A stream that breaks while a run waits for an answer drops the run: the workflow sees
// ErrDropped (and ErrDisconnected), and no completion or failure is sent for it, whatever it
// returns — the server takes the workflow back from the broken stream.
func TestBrokenStreamDropsRunsInFlight(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	stepErr := make(chan error, 1)
	RegisterWorkflow(w, "cut", func(ctx Context, _ any) (any, error) {
		if _, err := Step(ctx, "a", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return nil, err
		}
		_, err := Step(ctx, "b", func(context.Context) (int, error) { return 2, nil })
		stepErr <- err
		// A failure of its own making: must not be sent either.
		return nil, Fail("Oops", "b did not run: %v", err)
	})
	// Records are never answered: a's stays outstanding until the stream breaks.
	f := startFake(t, w, func(m *pb.WorkerMessage) *pb.Reply {
		if m.GetRecordStep() != nil {
			return nil
		}
		return okReply(m)
	})
	f.dispatch("wf-4", "cut")
	f.waitFor("a's record", func(msgs []*pb.WorkerMessage) bool { return len(records(msgs)) == 1 })
	f.breakStream()
	waitEnded(t, ended, "wf-4")

	if err := <-stepErr; !errors.Is(err, ErrDropped) || !errors.Is(err, ErrDisconnected) {
		t.Fatalf("step b returned %v, want ErrDropped wrapping ErrDisconnected", err)
	}
	msgs := f.messages()
	if done := completions(msgs); len(done) != 0 || len(requests(msgs)) != 1 {
		t.Fatalf("after the break the worker sent (or tried to send) %v", msgs)
	}
}
