package waymark

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// What a worker does with something larger than its server takes (the sizes in the Welcome):
// it never sends it — the server would end the stream, and with it every workflow the worker
// runs — but fails the workflow, the step or the request, each the way its own kind of
// failure goes.

// sized is a fake server's welcome with these limits.
func sized(payload, message uint64) *pb.Welcome {
	return &pb.Welcome{HeartbeatIntervalMs: 3_600_000, MaxPayloadBytes: payload, MaxMessageBytes: message}
}

// text is a string whose JSON (quotes included) is n bytes.
func text(n int) string { return strings.Repeat("x", n-2) }

// sentList names what the worker asked the server, in order: the kind of each request, and
// the step a record is for. Payloads of thousands of bytes would bury a failure's report.
func sentList(msgs []*pb.WorkerMessage) string {
	var out []string
	for _, m := range requests(msgs) {
		out = append(out, kindOf(m)+":"+m.GetRecordStep().GetName())
	}
	return strings.Join(out, " ")
}

// A workflow whose output is over the payload limit completes as failed, with kind
// PAYLOAD_TOO_LARGE and the sizes in its message, and its output is not sent.
func TestOutputTooLargeFailsTheWorkflow(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	RegisterWorkflow(w, "big", func(Context, any) (string, error) { return text(1001), nil })
	f := startFakeWelcome(t, w, sized(1000, 100_000), okReply)
	f.dispatch("wf-big", "big")
	waitEnded(t, ended, "wf-big")

	done := completions(f.messages())
	if len(done) != 1 {
		t.Fatalf("completions %v", done)
	}
	fail := done[0].GetFailure()
	if done[0].GetOutput() != nil || fail.GetKind() != "PAYLOAD_TOO_LARGE" ||
		fail.GetMessage() != "the workflow's output is 1001 bytes of JSON; the server takes at most 1000" {
		t.Fatalf("completion with failure %v, output of %d bytes", fail, jsonSize(done[0].GetOutput()))
	}
}

// A step whose output is over the payload limit fails, and is recorded as failed with kind
// PAYLOAD_TOO_LARGE. It is not retried. The workflow gets the error a replay of that record
// gives — checked by running it again on the record.
func TestStepOutputTooLargeIsARecordedStepFailure(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	calls := 0
	got := make(chan error, 2)
	RegisterWorkflow(w, "bigstep", func(ctx Context, _ any) (string, error) {
		_, err := Step(ctx, "big", func(context.Context) (string, error) {
			calls++
			return text(1001), nil
		}, WithRetry(Attempts(3)))
		got <- err
		return "carried on", nil
	})
	f := startFakeWelcome(t, w, sized(1000, 100_000), okReply)
	f.dispatch("wf-s", "bigstep")
	waitEnded(t, ended, "wf-s")
	first := <-got

	done := completions(f.messages())
	if len(done) != 1 || len(done[0].GetSteps()) != 1 {
		t.Fatalf("completions %v", done)
	}
	rec := done[0].GetSteps()[0]
	if rec.GetName() != "big" || rec.GetOutput() != nil || rec.GetAttempts() != 1 ||
		rec.GetFailure().GetKind() != "PAYLOAD_TOO_LARGE" || !strings.Contains(rec.GetFailure().GetMessage(), "1001 bytes") {
		t.Fatalf("step record %v", rec)
	}
	if out, _ := payloadJSON(done[0].GetOutput()); string(out) != `"carried on"` || calls != 1 {
		t.Fatalf("output %s after %d calls of the step", out, calls)
	}
	var se *StepError
	if !errors.As(first, &se) || !errors.Is(first, ErrPayloadTooLarge) || !IsReason(first, "PAYLOAD_TOO_LARGE") {
		t.Fatalf("the workflow got %#v", first)
	}

	// The same workflow again, its history holding the record: the step is not called, and
	// the workflow gets the same error.
	f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_DispatchWorkflow{DispatchWorkflow: &pb.DispatchWorkflow{
		WorkflowId: "wf-s", WorkflowName: "bigstep", Epoch: 2,
		Steps: []*pb.Step{{StepId: rec.GetStepId(), Name: rec.GetName(), Failure: rec.GetFailure(), Attempts: 1}},
	}}})
	waitEnded(t, ended, "wf-s")
	if replayed := <-got; !reflect.DeepEqual(replayed, first) || calls != 1 {
		t.Fatalf("replay gave %#v, the first run %#v; the step was called %d times", replayed, first, calls)
	}
}

// A message, an event value, a stream value, a child's input or a remote step's input over the
// payload limit is refused before anything is sent, with an error that says so; the stream goes
// on, and the workflow with it.
func TestRequestsTooLargeAreRefusedBeforeSending(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	big := text(1001)
	ops := map[string]func(Context) error{
		"send":         func(ctx Context) error { _, err := Send(ctx, "other", "", big); return err },
		"set event":    func(ctx Context) error { return SetEvent(ctx, "k", big) },
		"write stream": func(ctx Context) error { _, err := WriteStream(ctx, "s", big); return err },
		"start child":  func(ctx Context) error { _, err := StartChild(ctx, "child", big, nil); return err },
		"start step":   func(ctx Context) error { _, err := StartStep(ctx, "remote", big); return err },
	}
	errs := map[string]error{}
	RegisterWorkflow(w, "asks", func(ctx Context, _ any) (string, error) {
		for name, op := range ops {
			errs[name] = op(ctx)
		}
		return "still here", nil
	})
	f := startFakeWelcome(t, w, sized(1000, 100_000), okReply)
	f.dispatch("wf-r", "asks")
	waitEnded(t, ended, "wf-r")

	for name, err := range errs {
		var e *Error
		if !errors.As(err, &e) || e.Reason != "PAYLOAD_TOO_LARGE" || !errors.Is(err, ErrPayloadTooLarge) ||
			!strings.Contains(e.Message, "1001 bytes of JSON; the server takes at most 1000") {
			t.Errorf("%s: %#v", name, err)
		}
	}
	msgs := f.messages()
	for _, m := range requests(msgs) {
		if m.GetCompleteWorkflow() == nil {
			t.Errorf("sent a %T", m.GetKind())
		}
	}
	if done := completions(msgs); len(done) != 1 || done[0].GetFailure() != nil {
		t.Fatalf("completions %v", done)
	}
}

// A completion that with its held step record would be over the message limit sends the record
// on its own, then the completion without it: every message under the limit, the record first.
func TestCompletionTooLargeSendsHeldRecordsFirst(t *testing.T) {
	const limit = 12_000
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	RegisterWorkflow(w, "two", func(ctx Context, _ any) (string, error) {
		for _, name := range []string{"a", "b"} {
			if _, err := Step(ctx, name, func(context.Context) (string, error) { return text(7000), nil }); err != nil {
				return "", err
			}
		}
		return text(7000), nil
	})
	f := startFakeWelcome(t, w, sized(8000, limit), okReply)
	f.dispatch("wf-c", "two")
	waitEnded(t, ended, "wf-c")

	msgs := f.messages()
	for _, m := range requests(msgs) {
		if n := proto.Size(m); n > limit {
			t.Errorf("a message of %d bytes: %s", n, kindOf(m))
		}
		if c := m.GetCompleteWorkflow(); c != nil && (len(c.GetSteps()) != 0 || len(c.GetOutput().GetJson().GetStringValue()) != 6998) {
			t.Errorf("completion carries %d steps, output %d bytes", len(c.GetSteps()), len(c.GetOutput().GetJson().GetStringValue()))
		}
	}
	if sent := sentList(msgs); sent != "record:a record:b complete:" {
		t.Fatalf("sent %s", sent)
	}
}

// The completion sent after records that went on their own waits for their answers: when the
// server refuses one, the completion is not sent, as a completion carrying it would have been
// refused with it.
func TestCompletionWaitsForTheRecordsSentAhead(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	RegisterWorkflow(w, "one", func(ctx Context, _ any) (string, error) {
		if _, err := Step(ctx, "a", func(context.Context) (string, error) { return text(7000), nil }); err != nil {
			return "", err
		}
		return text(7000), nil
	})
	f := startFakeWelcome(t, w, sized(8000, 12_000), func(m *pb.WorkerMessage) *pb.Reply {
		if m.GetRecordStep() != nil {
			return &pb.Reply{Result: &pb.Reply_Error{Error: &pb.ReplyError{Code: 9, Reason: "STEP_CONFLICT", Message: "recorded with another result"}}}
		}
		return okReply(m)
	})
	f.dispatch("wf-w", "one")
	waitEnded(t, ended, "wf-w")
	msgs := f.messages()
	if sent := sentList(msgs); sent != "record:a" {
		t.Fatalf("sent %s", sent)
	}
}

// A remote step attempt whose output is over the payload limit reports a failure of kind
// PAYLOAD_TOO_LARGE instead of the output.
func TestRemoteStepOutputTooLargeFailsTheAttempt(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	RegisterStep(w, "remote", func(context.Context, any) (string, error) { return text(1001), nil })
	f := startFakeWelcome(t, w, sized(1000, 100_000), okReply)
	f.push(&pb.ServerMessage{Kind: &pb.ServerMessage_DispatchStep{DispatchStep: &pb.DispatchStep{
		WorkflowId: "wf-x", StepId: 3, StepName: "remote", Attempt: 1,
	}}})
	msgs := f.waitFor("the step's result", func(msgs []*pb.WorkerMessage) bool {
		for _, m := range msgs {
			if m.GetStepResult() != nil {
				return true
			}
		}
		return false
	})
	for _, m := range msgs {
		if res := m.GetStepResult(); res != nil && (res.GetOutput() != nil || res.GetFailure().GetKind() != "PAYLOAD_TOO_LARGE") {
			t.Fatalf("step result with failure %v, output of %d bytes", res.GetFailure(), jsonSize(res.GetOutput()))
		}
	}
}
