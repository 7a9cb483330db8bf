package waymark_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
	"github.com/waymark-dev/waymark/sdk-clients/go/internal/golden"
)

// The offline Replayer: recorded calls are answered from the history, the first unrecorded one
// ends the replay (Suspended), and nothing is sent, waited for or run. Every test replays
// through replayOf, which fails the test if a replay tried to send anything or ran a step
// function. None of them uses the server.

// ran counts the step functions the tests' workflows ran: a replay runs none.
var ran atomic.Int64

func never[T any](context.Context) (T, error) {
	ran.Add(1)
	var zero T
	return zero, errors.New("a replayed step's function ran")
}

type replayer struct {
	*waymark.Replayer
	t    *testing.T
	sent func() int32
}

// replayOf is a replayer of the workflows register registers on a fresh worker (never run).
func replayOf(t *testing.T, register func(w *waymark.Worker)) replayer {
	w := waymark.NewWorker(waymark.WorkerOptions{Logger: slog.New(slog.DiscardHandler)})
	register(w)
	p := waymark.NewReplayer(w)
	r := replayer{Replayer: p, t: t, sent: waymark.CountReplaySends(p)}
	before := ran.Load()
	t.Cleanup(func() {
		if n := r.sent(); n != 0 {
			t.Errorf("a replay tried to send %d messages", n)
		}
		if n := ran.Load() - before; n != 0 {
			t.Errorf("a replay ran %d step functions", n)
		}
	})
	return r
}

// replay replays a history of workflow name with these steps, failing the test on an error.
func (r replayer) replay(name string, input any, steps ...waymark.RecordedStep) waymark.Replayed {
	r.t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		r.t.Fatal(err)
	}
	got, err := r.Replay(context.Background(), &waymark.RecordedHistory{WorkflowID: "wf", WorkflowName: name, Input: in, Steps: steps})
	if err != nil {
		r.t.Fatalf("replay %s: %v", name, err)
	}
	return got
}

func out(step uint32, name, output string) waymark.RecordedStep {
	return waymark.RecordedStep{StepID: step, Name: name, Output: json.RawMessage(output)}
}

func failed(step uint32, name, message string) waymark.RecordedStep {
	return waymark.RecordedStep{StepID: step, Name: name, Failure: &waymark.Failure{Kind: "StepFailed", Message: message}}
}

// wantReturned fails the test unless got is Returned with a value equal to want as JSON.
func wantReturned(t *testing.T, got waymark.Replayed, want string) {
	t.Helper()
	r, ok := got.(waymark.Returned)
	var x, y any
	if !ok || json.Unmarshal(r.Value, &x) != nil || json.Unmarshal([]byte(want), &y) != nil || !reflect.DeepEqual(x, y) {
		t.Fatalf("replayed to %v, want returned %s", got, want)
	}
}

type purchase struct {
	ID int `json:"id"`
}

// checkout makes a local step, a request to the server and a remote step.
func checkout(w *waymark.Worker) {
	waymark.RegisterWorkflow(w, "checkout", func(ctx waymark.Context, o purchase) (any, error) {
		charged, err := waymark.Step(ctx, "charge", never[string])
		if err != nil {
			return nil, err
		}
		if _, err := waymark.Send(ctx, "shipping", "ship", map[string]int{"order": o.ID}); err != nil {
			return nil, err
		}
		label, err := waymark.CallStep[string](ctx, "print_label", o)
		if err != nil {
			return nil, err
		}
		return map[string]string{"charged": charged, "label": label}, nil
	})
	waymark.RegisterStep(w, "print_label", func(ctx context.Context, o purchase) (string, error) { return never[string](ctx) })
}

var checkoutSteps = []waymark.RecordedStep{
	out(0, "charge", `"ch_1"`),
	out(1, "waymark.send", `{"message_id": "m-1"}`),
	out(2, "print_label", `"label-7"`),
}

func TestReplayOfACompleteHistoryReturnsWhatTheCodeReturns(t *testing.T) {
	got := replayOf(t, checkout).replay("checkout", purchase{ID: 7}, checkoutSteps...)
	wantReturned(t, got, `{"charged": "ch_1", "label": "label-7"}`)
}

func TestReplayOfAnotherStepAtARecordedPositionIsNonDeterminism(t *testing.T) {
	steps := []waymark.RecordedStep{out(0, "charge", `"ch_1"`), out(1, "waymark.set_event", `{"key": "k"}`)}
	got := replayOf(t, checkout).replay("checkout", purchase{ID: 7}, steps...)
	f, ok := got.(waymark.Failed)
	if !ok || f.Kind != "NonDeterminism" || !errors.Is(f.Err, waymark.ErrNonDeterminism) {
		t.Fatalf("replayed to %v, want a NonDeterminism failure", got)
	}
}

// A live step, a request to the server, a remote step: each ends the replay at its position.
func TestReplayEndsAtTheFirstUnrecordedCall(t *testing.T) {
	r := replayOf(t, checkout)
	for n := range len(checkoutSteps) {
		if got := r.replay("checkout", purchase{ID: 7}, checkoutSteps[:n]...); got != (waymark.Suspended{StepID: uint32(n)}) {
			t.Errorf("%d steps recorded: replayed to %v, want suspended at %d", n, got, n)
		}
	}
}

func TestReplayFailsAsTheLiveRunDid(t *testing.T) {
	r := replayOf(t, func(w *waymark.Worker) {
		checkout(w)
		waymark.RegisterWorkflow(w, "picky", func(waymark.Context, any) (any, error) {
			return nil, waymark.Fail("PaymentDeclined", "card expired")
		})
		waymark.RegisterWorkflow(w, "panicky", func(waymark.Context, any) (any, error) { panic("oops") })
	})
	// A recorded failure the code does not handle fails the workflow, as it did live.
	got := r.replay("checkout", purchase{ID: 7}, failed(0, "charge", "declined"))
	var stepErr *waymark.StepError
	if f, ok := got.(waymark.Failed); !ok || f.Kind != "StepFailed" || !errors.As(f.Err, &stepErr) || stepErr.Message != "declined" {
		t.Errorf("an unhandled recorded failure: %v", got)
	}
	if f, ok := r.replay("picky", nil).(waymark.Failed); !ok || f.Kind != "PaymentDeclined" || f.Message != "card expired" {
		t.Errorf("the workflow's own failure: %v", f)
	}
	if f, ok := r.replay("panicky", nil).(waymark.Failed); !ok || f.Kind != "Panic" || f.Message != "oops" {
		t.Errorf("a panic: %v", f)
	}
}

// The end of the history is an interruption, like a cancel: code that handles step errors
// does not catch it, and code that swallows every error still ends where the history does.
func TestTheEndOfTheHistoryIsNotTheCodesToCatch(t *testing.T) {
	var cause, later error
	var handled bool
	r := replayOf(t, func(w *waymark.Worker) {
		waymark.RegisterWorkflow(w, "careless", func(ctx waymark.Context, _ any) (string, error) {
			_, err := waymark.Step(ctx, "a", never[int])
			var stepErr *waymark.StepError
			handled = errors.As(err, &stepErr)
			cause = context.Cause(ctx)
			_, later = waymark.Step(ctx, "b", never[int])
			return "swallowed", nil
		})
	})
	if got := r.replay("careless", nil); got != (waymark.Suspended{StepID: 0}) {
		t.Fatalf("replayed to %v, want suspended at 0", got)
	}
	if handled || !errors.Is(cause, waymark.ErrHistoryEnded) || !errors.Is(later, waymark.ErrHistoryEnded) {
		t.Errorf("caught as a step's error: %v; the context's cause: %v; a later call: %v", handled, cause, later)
	}
}

func TestReplayReadsTheTimeAndAUUIDElseSuspends(t *testing.T) {
	r := replayOf(t, func(w *waymark.Worker) {
		waymark.RegisterWorkflow(w, "drawn", func(ctx waymark.Context, _ any) ([]any, error) {
			now, err := waymark.Now(ctx)
			if err != nil {
				return nil, err
			}
			id, err := waymark.UUID(ctx)
			return []any{now.UnixMilli(), id}, err
		})
	})
	uuid := "d277cd57-b29b-49a3-bb39-3013ded2ea53"
	steps := []waymark.RecordedStep{out(0, "waymark.now", `{"now_ms": 5}`), out(1, "waymark.uuid", fmt.Sprintf(`{"uuid": %q}`, uuid))}
	wantReturned(t, r.replay("drawn", nil, steps...), fmt.Sprintf(`[5, %q]`, uuid))
	for n := range 2 {
		if got := r.replay("drawn", nil, steps[:n]...); got != (waymark.Suspended{StepID: uint32(n)}) {
			t.Errorf("%d recorded: %v", n, got)
		}
	}
}

// Patched offline: its marker, or an old history's step where the marker would be, answers
// from the history; a live call — nothing recorded where it looks — ends the replay there, as
// any live call does; a malformed marker fails the workflow with Patched's error.
func TestReplayOfPatchedAnswersFromTheHistoryElseSuspends(t *testing.T) {
	r := replayOf(t, func(w *waymark.Worker) {
		waymark.RegisterWorkflow(w, "branching", func(ctx waymark.Context, _ any) (string, error) {
			ok, err := waymark.Patched(ctx, "fix")
			if err != nil {
				return "", err
			}
			if ok {
				return waymark.Step(ctx, "new", never[string])
			}
			return waymark.Step(ctx, "old", never[string])
		})
	})
	marker := out(0, "waymark.patch", `{"patch_id": "fix"}`)
	wantReturned(t, r.replay("branching", nil, marker, out(1, "new", `"n"`)), `"n"`)
	wantReturned(t, r.replay("branching", nil, out(0, "old", `"o"`)), `"o"`)
	if got := r.replay("branching", nil); got != (waymark.Suspended{StepID: 0}) {
		t.Errorf("nothing recorded: replayed to %v, want suspended at 0", got)
	}
	if got := r.replay("branching", nil, marker); got != (waymark.Suspended{StepID: 1}) {
		t.Errorf("the marker recorded: replayed to %v, want suspended at 1", got)
	}
	got := r.replay("branching", nil, out(0, "waymark.patch", `{}`))
	if f, ok := got.(waymark.Failed); !ok || f.Err == nil || f.Err.Error() != "waymark: recorded waymark.patch step has no patch_id" {
		t.Errorf("a malformed marker: replayed to %v", got)
	}
}

// Waits whose outcome is recorded return at once; a replay never waits.
func TestReplayedWaitsReturnAtOnceAndASleepNotOverSuspends(t *testing.T) {
	r := replayOf(t, func(w *waymark.Worker) {
		waymark.RegisterWorkflow(w, "waits", func(ctx waymark.Context, _ any) (any, error) {
			if err := waymark.Sleep(ctx, time.Hour); err != nil {
				return nil, err
			}
			msg, _, err := waymark.Recv[any](ctx, "t", time.Hour)
			return msg, err
		})
	})
	now := time.Now().UnixMilli()
	later, past := now+3_600_000, now-1
	done := []waymark.RecordedStep{
		out(0, "waymark.sleep", fmt.Sprintf(`{"wake_at_ms": %d}`, past)),
		out(1, "waymark.recv.deadline", fmt.Sprintf(`{"deadline_ms": %d}`, later)),
		out(2, "waymark.recv", `{"message": "hi"}`),
	}
	started := time.Now()
	wantReturned(t, r.replay("waits", nil, done...), `"hi"`)
	cases := []struct {
		what  string
		steps []waymark.RecordedStep
		at    uint32
	}{
		{"a receive's deadline recorded, not its outcome: the recovery asks the server", done[:2], 2},
		{"a receive not begun", done[:1], 1},
		{"a sleep whose wake time is still ahead: the live run sleeps there", []waymark.RecordedStep{out(0, "waymark.sleep", fmt.Sprintf(`{"wake_at_ms": %d}`, later))}, 0},
		{"nothing recorded", nil, 0},
	}
	for _, c := range cases {
		if got := r.replay("waits", nil, c.steps...); got != (waymark.Suspended{StepID: c.at}) {
			t.Errorf("%s: %v, want suspended at %d", c.what, got, c.at)
		}
	}
	if d := time.Since(started); d > time.Second {
		t.Errorf("a replay waited: %v", d)
	}
}

func TestChildrenAndSeveralWaitsReplayWithoutTheServer(t *testing.T) {
	r := replayOf(t, func(w *waymark.Worker) {
		waymark.RegisterWorkflow(w, "parent", func(ctx waymark.Context, _ any) ([]any, error) {
			child, err := waymark.StartChild(ctx, "kid", map[string]int{"n": 1}, nil)
			if err != nil {
				return nil, err
			}
			h, err := waymark.StartStep(ctx, "slow", nil)
			if err != nil {
				return nil, err
			}
			first, err := waymark.WaitFirst(ctx, h, waymark.WorkflowRef(child))
			if err != nil {
				return nil, err
			}
			kid, err := waymark.AwaitChild[int](ctx, child)
			if err != nil {
				return nil, err
			}
			slow, err := waymark.StepResult[string](ctx, h)
			return []any{kid, first, slow}, err
		})
	})
	steps := []waymark.RecordedStep{
		out(0, "waymark.start_child", `{"workflow_id": "wf/child-0"}`),
		out(1, "slow", `"s"`),
		out(2, "waymark.select", `{"index": 1}`),
		out(3, "waymark.await_child", `{"status": "SUCCESS", "output": 2}`),
	}
	wantReturned(t, r.replay("parent", nil, steps...), `[2, 1, "s"]`)
	for n := range len(steps) {
		if got := r.replay("parent", nil, steps[:n]...); got != (waymark.Suspended{StepID: uint32(n)}) {
			t.Errorf("%d recorded: %v", n, got)
		}
	}
}

func TestReplayOfAnUnknownWorkflowIsAnError(t *testing.T) {
	_, err := replayOf(t, checkout).Replay(context.Background(), &waymark.RecordedHistory{WorkflowName: "nope"})
	if !errors.Is(err, waymark.ErrUnknownWorkflow) {
		t.Fatalf("got %v", err)
	}
}

// A history read from JSON: the id defaults to "replay", the input to null, and a recorded
// null output stays null when written back (it is what a wait that timed out records).
func TestRecordedHistoryReadsAndWritesTheGoldenFormat(t *testing.T) {
	var h waymark.RecordedHistory
	text := `{"workflow_name": "who", "steps": [{"step_id": 0, "name": "waymark.recv", "output": null},
		{"step_id": 1, "name": "f", "failure": {"kind": "StepFailed", "message": "boom"}}]}`
	if err := json.Unmarshal([]byte(text), &h); err != nil {
		t.Fatal(err)
	}
	back, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"workflow_id":"","workflow_name":"who","input":null,"steps":[{"step_id":0,"name":"waymark.recv","output":null},` +
		`{"step_id":1,"name":"f","failure":{"kind":"StepFailed","message":"boom"}}]}`
	if string(back) != want {
		t.Errorf("written back as %s", back)
	}
	r := replayOf(t, func(w *waymark.Worker) {
		waymark.RegisterWorkflow(w, "who", func(ctx waymark.Context, in any) ([]any, error) {
			return []any{ctx.WorkflowID(), in}, nil
		})
	})
	got, err := r.Replay(context.Background(), &h)
	if err != nil {
		t.Fatal(err)
	}
	wantReturned(t, got, `["replay", null]`)
}

type looperInput struct {
	N     int `json:"n"`
	Until int `json:"until"`
}

// A run that continues as new replays to ContinuedAsNew with the next input; the last run
// returns; each run's history is its own, so another step at its first position is
// non-determinism, and a run with nothing recorded suspends at its first step.
func TestReplayOfARunThatContinuedAsNew(t *testing.T) {
	r := replayOf(t, func(w *waymark.Worker) {
		waymark.RegisterWorkflow(w, "looper", func(ctx waymark.Context, in looperInput) (int, error) {
			n, err := waymark.Step(ctx, "tick", never[int])
			if err != nil {
				return 0, err
			}
			if n >= in.Until {
				return n, nil
			}
			return 0, waymark.ContinueAsNew(looperInput{N: n + 1, Until: in.Until})
		})
	})
	got := r.replay("looper", looperInput{N: 0, Until: 2}, out(0, "tick", `0`))
	c, ok := got.(waymark.ContinuedAsNew)
	var next looperInput
	if !ok || json.Unmarshal(c.Input, &next) != nil || next != (looperInput{N: 1, Until: 2}) {
		t.Fatalf("replayed to %v, want continued as new with {n: 1, until: 2}", got)
	}
	if s := got.String(); s != `continued as new with {"n":1,"until":2}` {
		t.Errorf("String() = %q", s)
	}
	wantReturned(t, r.replay("looper", looperInput{N: 2, Until: 2}, out(0, "tick", `2`)), `2`)
	if f, ok := r.replay("looper", looperInput{N: 0, Until: 2}, out(0, "tock", `0`)).(waymark.Failed); !ok || f.Kind != "NonDeterminism" {
		t.Errorf("another step at 0: %v, want NonDeterminism", f)
	}
	if got := r.replay("looper", looperInput{N: 1, Until: 2}); got != (waymark.Suspended{StepID: 0}) {
		t.Errorf("nothing recorded: %v, want suspended at 0", got)
	}
}

// golden.update's history with a message on its update topic that is no update (an older
// server let a plain send through): it is passed over, and the next receive takes the update.
func TestReplayOfAnUpdatePassesOverAMessageThatIsNoUpdate(t *testing.T) {
	r := replayOf(t, func(w *waymark.Worker) { golden.Register(w) })
	got := r.replay("golden.update", map[string]any{},
		out(0, "waymark.recv.deadline", `{"deadline_ms": 1}`),
		out(1, "waymark.recv", `{"message": "no update"}`),
		out(2, "waymark.recv.deadline", `{"deadline_ms": 2}`),
		out(3, "waymark.recv", `{"message": {"update_id": "u-1", "args": {"n": 1}}}`),
		out(4, "apply", `2`),
		out(5, "waymark.set_event", `{"key": "waymark.update/u-1"}`),
	)
	wantReturned(t, got, `{"update": "u-1", "total": 2}`)
}
