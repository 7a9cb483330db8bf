package waymark

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	otelcodes "go.opentelemetry.io/otel/codes"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Continue-as-new through the worker's run loop, against the fake server: what the completion
// carries, and that it is no failure.

type loop struct {
	N     int `json:"n"`
	Until int `json:"until"`
}

// registerLoop registers "looper": a step "tick" (returning n, counted in ticks), then n when
// n reaches until, else continue as new with n + 1 (wrapped, when wrap: errors.As finds it).
func registerLoop(w *Worker, ticks *atomic.Int32, wrap bool) {
	RegisterWorkflow(w, "looper", func(ctx Context, in loop) (int, error) {
		n, err := Step(ctx, "tick", func(context.Context) (int, error) { ticks.Add(1); return in.N, nil })
		if err != nil {
			return 0, err
		}
		if n >= in.Until {
			return n, nil
		}
		err = ContinueAsNew(loop{N: n + 1, Until: in.Until})
		if wrap {
			err = fmt.Errorf("round %d done: %w", n, err)
		}
		return 0, err
	})
}

func wantJSON(t *testing.T, what string, p *pb.Payload, want string) {
	t.Helper()
	got, err := payloadJSON(p)
	var x, y any
	if err != nil || json.Unmarshal(got, &x) != nil || json.Unmarshal([]byte(want), &y) != nil || fmt.Sprint(x) != fmt.Sprint(y) {
		t.Fatalf("%s is %s (%v), want %s", what, got, err, want)
	}
}

// The run's completion is continue_as_new with the next input, carrying the step record the
// run held back (no RecordStep of its own); the run's span is not failed. A replay of the run
// (its step recorded) runs no step function and continues as new the same way.
func TestContinueAsNewCompletesWithTheNextInputAndTheHeldSteps(t *testing.T) {
	w, spans := tracedWorker(t, WorkerOptions{ParkAfter: -1})
	var ticks atomic.Int32
	registerLoop(w, &ticks, false)
	f := startFake(t, w, okReply)
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "loop", WorkflowName: "looper", Epoch: 1, Input: anyPayload(loop{N: 0, Until: 3})})
	msgs := f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })

	c := completions(msgs)[0]
	if c.GetFailure() != nil || c.GetOutput() != nil || c.GetContinueAsNew() == nil {
		t.Fatalf("completion %v, want continue_as_new", c)
	}
	wantJSON(t, "the next run's input", c.GetContinueAsNew().GetInput(), `{"n": 1, "until": 3}`)
	if len(c.GetSteps()) != 1 || c.GetSteps()[0].GetName() != "tick" || c.GetSteps()[0].GetStepId() != 0 {
		t.Fatalf("the completion carries steps %v, want the held record of tick at 0", c.GetSteps())
	}
	wantJSON(t, "tick's output", c.GetSteps()[0].GetOutput(), `0`)
	if r := records(msgs); len(r) != 0 {
		t.Fatalf("step records sent on their own: %v", r)
	}
	if sp := spans.waitForSpan(t, "workflow looper"); sp.Status.Code == otelcodes.Error {
		t.Fatalf("the run's span is failed: %v", sp.Status)
	}

	// The replay: tick is recorded, so it does not run, and the run ends the same way.
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "loop", WorkflowName: "looper", Epoch: 2, Input: anyPayload(loop{N: 0, Until: 3}),
		Steps: []*pb.Step{{StepId: 0, Name: "tick", Output: anyPayload(0), Attempts: 1}}})
	msgs = f.waitFor("the replay's completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 2 })
	again := completions(msgs)[1]
	wantJSON(t, "the replay's next input", again.GetContinueAsNew().GetInput(), `{"n": 1, "until": 3}`)
	if len(again.GetSteps()) != 0 || again.GetEpoch() != 2 || ticks.Load() != 1 {
		t.Fatalf("replay's completion %v; tick ran %d times, want once", again, ticks.Load())
	}

	// The last run returns its output as any run does.
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "loop", WorkflowName: "looper", Epoch: 3, Input: anyPayload(loop{N: 3, Until: 3})})
	msgs = f.waitFor("the last run's completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 3 })
	wantJSON(t, "the output", completions(msgs)[2].GetOutput(), `3`)
}

// errors.As finds a wrapped ContinueAsNew: the workflow still continues as new.
func TestAWrappedContinueAsNewStillContinues(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{ParkAfter: -1})
	var ticks atomic.Int32
	registerLoop(w, &ticks, true)
	f := startFake(t, w, okReply)
	dispatchTraced(f, &pb.DispatchWorkflow{WorkflowId: "loop", WorkflowName: "looper", Epoch: 1, Input: anyPayload(loop{N: 1, Until: 2})})
	msgs := f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })
	wantJSON(t, "the next run's input", completions(msgs)[0].GetContinueAsNew().GetInput(), `{"n": 2, "until": 2}`)
}

// A next input the server would not take fails the workflow (PAYLOAD_TOO_LARGE), as an
// oversized output does, with the held step record aboard; one that is not JSON fails it with
// kind Serialization.
func TestContinueAsNewWithAnInputItCannotSendFailsTheWorkflow(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{ParkAfter: -1})
	RegisterWorkflow(w, "big", func(ctx Context, _ any) (int, error) {
		if _, err := Step(ctx, "tick", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return 0, err
		}
		return 0, ContinueAsNew(strings.Repeat("x", 200))
	})
	RegisterWorkflow(w, "odd", func(ctx Context, _ any) (int, error) {
		return 0, ContinueAsNew(make(chan int))
	})
	f := startFakeWelcome(t, w, &pb.Welcome{HeartbeatIntervalMs: 3_600_000, MaxPayloadBytes: 100, MaxMessageBytes: 4096}, okReply)
	f.dispatch("wf-big", "big")
	msgs := f.waitFor("the completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 1 })
	c := completions(msgs)[0]
	if c.GetFailure().GetKind() != reasonPayloadTooLarge || !strings.Contains(c.GetFailure().GetMessage(), "the next run's input") || len(c.GetSteps()) != 1 {
		t.Fatalf("completion %v, want a PAYLOAD_TOO_LARGE failure carrying the tick record", c)
	}
	f.dispatch("wf-odd", "odd")
	msgs = f.waitFor("the second completion", func(m []*pb.WorkerMessage) bool { return len(completions(m)) == 2 })
	if got := completions(msgs)[1].GetFailure(); got.GetKind() != "Serialization" {
		t.Fatalf("failure %v, want kind Serialization", got)
	}
}
