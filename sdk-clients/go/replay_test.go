package waymark

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"testing"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// The primitives replaying through the cursor, on a run that has no connection: a call that
// went live instead of replaying would dereference the nil connection and fail the test.

func replayRun(steps ...*pb.Step) *run {
	return &run{
		Context:   context.Background(),
		id:        "wf-1",
		hist:      newHistory("wf-1", steps),
		parkAfter: -1,
		logger:    slog.New(slog.DiscardHandler),
	}
}

// Every primitive, replayed in the order it was recorded, returns what its history records and
// takes the positions it took when it ran live.
func TestPrimitivesReplayTheirRecordedResults(t *testing.T) {
	past := nowMs() - 1000
	r := replayRun(
		recordedStep(t, 0, "fetch", `"data"`),
		recordedStep(t, 1, sleepStep, fmt.Sprintf(`{"wake_at_ms": %d}`, past)),
		recordedStep(t, 2, recvDeadlineStep, fmt.Sprintf(`{"deadline_ms": %d}`, past)),
		recordedStep(t, 3, recvStep, `{"message": "hi"}`),
		recordedStep(t, 4, getEventDeadlineStep, fmt.Sprintf(`{"deadline_ms": %d}`, past)),
		recordedStep(t, 5, getEventStep, `null`),
		recordedStep(t, 6, sendStep, `{"message_id": "m-1"}`),
		recordedStep(t, 7, setEventStep, `{"key": "k"}`),
		recordedStep(t, 8, writeStreamStep, `{"offset": 4}`),
		recordedStep(t, 9, closeStreamStep, `{"offset": 5}`),
		recordedStep(t, 10, startChildStep, `{"workflow_id": "c-1"}`),
		recordedStep(t, 11, awaitChildStep, `{"status": "SUCCESS", "output": {"n": 3}}`),
		recordedStep(t, 12, "remote", `7`),
		recordedStep(t, 13, selectStep, `{"index": 1}`),
		recordedStep(t, 14, waitAllStep, `{"index": 0}`),
		failedStep(15, "flaky", stepFailedKind, "gave up"),
		recordedStep(t, 16, awaitChildStep, `{"status": "FAILED", "failure": {"kind": "Boom", "message": "no"}}`),
	)
	called := 0
	fn := func(context.Context) (string, error) { called++; return "live", nil }

	if v, err := Step(r, "fetch", fn); v != "data" || err != nil {
		t.Fatalf("Step: %q, %v", v, err)
	}
	start := time.Now()
	if err := Sleep(r, time.Hour); err != nil || time.Since(start) > time.Second {
		t.Fatalf("Sleep past its recorded wake time: %v after %v", err, time.Since(start))
	}
	if msg, ok, err := Recv[string](r, "t", time.Hour); msg != "hi" || !ok || err != nil {
		t.Fatalf("Recv: %q, %v, %v", msg, ok, err)
	}
	if v, ok, err := GetEvent[string](r, "other", "k", time.Hour); v != "" || ok || err != nil {
		t.Fatalf("GetEvent recorded as timed out: %q, %v, %v", v, ok, err)
	}
	if id, err := Send(r, "other", "t", "payload"); id != "m-1" || err != nil {
		t.Fatalf("Send: %q, %v", id, err)
	}
	if err := SetEvent(r, "k", 1); err != nil {
		t.Fatalf("SetEvent: %v", err)
	}
	if off, err := WriteStream(r, "s", "v"); off != 4 || err != nil {
		t.Fatalf("WriteStream: %d, %v", off, err)
	}
	if err := CloseStream(r, "s"); err != nil {
		t.Fatalf("CloseStream: %v", err)
	}
	if id, err := StartChild(r, "child", nil, nil); id != "c-1" || err != nil {
		t.Fatalf("StartChild: %q, %v", id, err)
	}
	type out struct{ N int }
	if v, err := AwaitChild[out](r, "c-1"); v.N != 3 || err != nil {
		t.Fatalf("AwaitChild: %+v, %v", v, err)
	}
	h, err := StartStep(r, "remote", "in")
	if err != nil || h.step != 12 {
		t.Fatalf("StartStep: %+v, %v", h, err)
	}
	if v, err := StepResult[int](r, h); v != 7 || err != nil {
		t.Fatalf("StepResult: %d, %v", v, err)
	}
	if i, err := WaitFirst(r, h, WorkflowRef("c-1")); i != 1 || err != nil {
		t.Fatalf("WaitFirst: %d, %v", i, err)
	}
	if err := WaitAll(r, h); err != nil {
		t.Fatalf("WaitAll: %v", err)
	}
	var se *StepError
	if _, err := Step(r, "flaky", fn); !errors.As(err, &se) || se.Message != "gave up" || se.Reason != stepFailedKind {
		t.Fatalf("Step recorded as failed: %v", err)
	}
	var f *Failure
	if _, err := AwaitChild[out](r, "c-2"); !errors.As(err, &f) || *f != (Failure{Kind: "ChildFailed", Message: "child workflow c-2 failed: Boom: no"}) {
		t.Fatalf("AwaitChild of a failed child: %v", err)
	}
	if called != 0 {
		t.Fatalf("a replayed step ran its function %d times", called)
	}
	if next := r.hist.take(0); next != 17 {
		t.Fatalf("the replay took %d positions, the history records 17", next)
	}
}

// A primitive replayed where the history records another step fails with the standard
// non-determinism error, whichever of its positions disagrees.
func TestPrimitivesAtAnotherStepAreNonDeterminism(t *testing.T) {
	past := nowMs() - 1000
	r := replayRun(
		recordedStep(t, 0, "charge", `1`),
		recordedStep(t, 1, recvDeadlineStep, fmt.Sprintf(`{"deadline_ms": %d}`, past)),
		recordedStep(t, 2, "audit", `null`),
		recordedStep(t, 3, "remote-a", `1`),
	)
	err := Sleep(r, time.Minute)
	if !errors.Is(err, ErrNonDeterminism) || err.Error() != `waymark: non-determinism: workflow "wf-1" called step "waymark.sleep" at position 0, where its history records "charge"` {
		t.Fatalf("Sleep over a step: %v", err)
	}
	_, _, err = Recv[string](r, "t", time.Minute)
	if !errors.Is(err, ErrNonDeterminism) || err.Error() != `waymark: non-determinism: workflow "wf-1" called step "waymark.recv" at position 2, where its history records "audit"` {
		t.Fatalf("Recv whose outcome position holds another step: %v", err)
	}
	h, err := StartStep(r, "remote-b", nil)
	if !errors.Is(err, ErrNonDeterminism) || err.Error() != `waymark: non-determinism: workflow "wf-1" called step "remote-b" at position 3, where its history records "remote-a"` {
		t.Fatalf("StartStep of another remote step: %v", err)
	}
	if _, err := StepResult[int](r, h); !errors.Is(err, ErrNonDeterminism) {
		t.Fatalf("StepResult of the mismatched handle: %v", err)
	}
}

// Primitives started from several goroutines take positions in the order they are called,
// not the order the goroutines were started: here the goroutines start last-first, each calls
// once the one before it has returned, and each gets the position its call order gives it.
// Names differ at every position, so a call given another's position would fail.
func TestPrimitivesFromGoroutinesTakePositionsInCallOrder(t *testing.T) {
	r := replayRun(
		recordedStep(t, 0, recvDeadlineStep, `{"deadline_ms": 1}`),
		recordedStep(t, 1, recvStep, `{"message": "m"}`),
		recordedStep(t, 2, "s", `"v"`),
		recordedStep(t, 3, sendStep, `{"message_id": "id-3"}`),
		recordedStep(t, 4, "remote", `4`),
	)
	calls := []func() (any, error){
		func() (any, error) { v, _, err := Recv[string](r, "", time.Minute); return v, err },
		func() (any, error) {
			return Step(r, "s", func(context.Context) (string, error) { return "live", nil })
		},
		func() (any, error) { return Send(r, "x", "", 1) },
		func() (any, error) {
			h, err := StartStep(r, "remote", nil)
			if err != nil {
				return nil, err
			}
			return StepResult[int](r, h)
		},
	}
	want := []any{"m", "v", "id-3", 4}
	gates := make([]chan struct{}, len(calls)+1)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	got := make([]any, len(calls))
	errs := make([]error, len(calls))
	for i := len(calls) - 1; i >= 0; i-- {
		go func() {
			<-gates[i]
			got[i], errs[i] = calls[i]()
			close(gates[i+1])
		}()
	}
	close(gates[0])
	<-gates[len(calls)]
	for i := range calls {
		if errs[i] != nil || got[i] != want[i] {
			t.Fatalf("call %d: %v, %v; want %v", i, got[i], errs[i], want[i])
		}
	}
}

// Remote steps started together from goroutines each get a position of their own, and each
// handle's result is the one recorded at its position.
func TestRemoteStepsStartedTogetherEachGetTheirPosition(t *testing.T) {
	const n = 16
	var steps []*pb.Step
	for p := range uint32(n) {
		steps = append(steps, recordedStep(t, p, "fetch", fmt.Sprint(p*10)))
	}
	r := replayRun(steps...)
	var mu sync.Mutex
	seen := map[uint32]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := StartStep(r, "fetch", nil)
			if err != nil {
				errs <- err
				return
			}
			v, err := StepResult[uint32](r, h)
			if err != nil || v != h.step*10 {
				errs <- fmt.Errorf("position %d replayed %d, %v", h.step, v, err)
				return
			}
			mu.Lock()
			seen[h.step] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := make([]uint32, n)
	for i := range want {
		want[i] = uint32(i)
	}
	if got := positionsOf(seen); !reflect.DeepEqual(got, want) {
		t.Fatalf("positions %v", got)
	}
}

// A dropped run takes no position and replays nothing, even what its history could answer:
// every operation returns the drop's error.
func TestDroppedRunTakesNoPositions(t *testing.T) {
	r := replayRun(recordedStep(t, 0, "fetch", `1`))
	h := &StepHandle{step: 0, name: "fetch"}
	dropped := fmt.Errorf("%w: test", ErrDropped)
	r.dropped.Store(&dropped)
	if _, err := Step(r, "fetch", func(context.Context) (int, error) { return 2, nil }); !errors.Is(err, ErrDropped) {
		t.Fatalf("Step on a dropped run: %v", err)
	}
	if _, err := StepResult[int](r, h); !errors.Is(err, ErrDropped) {
		t.Fatalf("StepResult on a dropped run: %v", err)
	}
	if next := r.hist.take(0); next != 0 {
		t.Fatalf("a dropped run took %d positions", next)
	}
}
