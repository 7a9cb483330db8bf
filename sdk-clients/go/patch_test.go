package waymark

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Patched on a run with no connection (see replayRun), and on a fake server: live, it holds
// the marker's record, which travels with what the run sends next; a replay sends and holds
// nothing. (The cursor's part, history.patched, is tested in history_test.go.)

// Live: Patched answers true and holds the marker at the position it took, in call order with
// the steps around it; the record is exactly worker.proto's shape.
func TestPatchedLiveHoldsTheMarker(t *testing.T) {
	r := replayRun(recordedStep(t, 0, "before", `1`))
	if _, err := Step(r, "before", func(context.Context) (int, error) { return 0, errors.New("ran") }); err != nil {
		t.Fatal(err)
	}
	if ok, err := Patched(r, "cents"); !ok || err != nil {
		t.Fatalf("live Patched: %v, %v", ok, err)
	}
	if _, err := UUID(r); err != nil {
		t.Fatal(err)
	}
	held := heldJSON(t, r)
	if len(held) != 2 || held[0] != `1 waymark.patch {"patch_id":"cents"}` || held[1][:15] != "2 waymark.uuid " {
		t.Fatalf("held %q", held)
	}
	if rec := r.deferred[0]; rec.GetAttempts() != 1 || rec.GetFailure() != nil || rec.GetWorkflowId() != "wf-1" {
		t.Fatalf("marker record %v", rec)
	}
}

// Its replay: the marker with this id answers true and takes the position, holding (so
// sending) nothing; the new branch's step replays after it.
func TestPatchedReplaysItsMarker(t *testing.T) {
	r := replayRun(
		recordedStep(t, 0, patchStep, `{"patch_id": "cents"}`),
		recordedStep(t, 1, "charge-cents", `100`),
	)
	if ok, err := Patched(r, "cents"); !ok || err != nil {
		t.Fatalf("replayed Patched: %v, %v", ok, err)
	}
	if v, err := Step(r, "charge-cents", func(context.Context) (int, error) { return 0, errors.New("ran") }); v != 100 || err != nil {
		t.Fatalf("the new branch's step: %v, %v", v, err)
	}
	if len(r.deferred) != 0 {
		t.Fatalf("a replay held %v", heldJSON(t, r))
	}
}

// A run of old code: another step is where the marker would be. Patched answers false and
// takes nothing; the old branch's step replays at that same position.
func TestPatchedUnderOldHistoryReplaysTheOldBranch(t *testing.T) {
	r := replayRun(recordedStep(t, 0, "charge", `1`))
	if ok, err := Patched(r, "cents"); ok || err != nil {
		t.Fatalf("Patched under old history: %v, %v", ok, err)
	}
	if v, err := Step(r, "charge", func(context.Context) (int, error) { return 0, errors.New("ran") }); v != 1 || err != nil {
		t.Fatalf("the old branch's step at position 0: %v, %v", v, err)
	}
	if len(r.deferred) != 0 {
		t.Fatalf("a replay held %v", heldJSON(t, r))
	}
}

// Two changes asked about in turn: under a history made when only the older one existed, the
// newer answers false and leaves the position to the older, which answers true there.
func TestPatchedAnotherPatchsMarkerThenItsOwn(t *testing.T) {
	r := replayRun(
		recordedStep(t, 0, patchStep, `{"patch_id": "older"}`),
		recordedStep(t, 1, "s", `"v"`),
	)
	if ok, err := Patched(r, "newer"); ok || err != nil {
		t.Fatalf("Patched(newer) over older's marker: %v, %v", ok, err)
	}
	if ok, err := Patched(r, "older"); !ok || err != nil {
		t.Fatalf("Patched(older) over its marker: %v, %v", ok, err)
	}
	if v, err := Step(r, "s", func(context.Context) (string, error) { return "live", nil }); v != "v" || err != nil {
		t.Fatalf("Step after the markers: %q, %v", v, err)
	}
	if len(r.deferred) != 0 {
		t.Fatalf("a replay held %v", heldJSON(t, r))
	}
}

// A malformed marker is Patched's error, and nothing is held.
func TestPatchedMalformedMarker(t *testing.T) {
	r := replayRun(recordedStep(t, 0, patchStep, `{"id": "cents"}`))
	ok, err := Patched(r, "cents")
	if ok || err == nil || err.Error() != "waymark: recorded waymark.patch step has no patch_id" {
		t.Fatalf("Patched over a malformed marker: %v, %v", ok, err)
	}
	if len(r.deferred) != 0 {
		t.Fatalf("held %v", heldJSON(t, r))
	}
}

// A stopped run gets its cause from a live Patched and holds nothing; what its history
// records still answers, as for Now. A dropped run takes no position.
func TestPatchedOnAStoppedRun(t *testing.T) {
	r := replayRun(recordedStep(t, 0, patchStep, `{"patch_id": "cents"}`), recordedStep(t, 1, "old", `1`))
	ctx, cancel := context.WithCancelCause(context.Background())
	r.Context, r.cancel = ctx, cancel
	r.stop(ErrCancelled)
	if ok, err := Patched(r, "cents"); !ok || err != nil {
		t.Fatalf("recorded marker on a cancelled run: %v, %v", ok, err)
	}
	if ok, err := Patched(r, "other"); ok || err != nil {
		t.Fatalf("old history on a cancelled run: %v, %v", ok, err)
	}
	if _, err := Step(r, "old", func(context.Context) (int, error) { return 2, nil }); err != nil {
		t.Fatalf("recorded step on a cancelled run: %v", err)
	}
	if ok, err := Patched(r, "cents"); ok || !errors.Is(err, ErrCancelled) {
		t.Fatalf("live Patched on a cancelled run: %v, %v", ok, err)
	}
	if len(r.deferred) != 0 {
		t.Fatalf("a cancelled run held %v", heldJSON(t, r))
	}

	d := replayRun(recordedStep(t, 0, patchStep, `{"patch_id": "cents"}`))
	dropped := fmt.Errorf("%w: test", ErrDropped)
	d.dropped.Store(&dropped)
	if ok, err := Patched(d, "cents"); ok || !errors.Is(err, ErrDropped) {
		t.Fatalf("Patched on a dropped run: %v, %v", ok, err)
	}
	if next := d.hist.take(0); next != 0 {
		t.Fatalf("a dropped run took %d positions", next)
	}
}

// On a worker (a fake server): a live Patched sends nothing of its own. Its marker travels
// with the run's next request — flushed before it, at the position Patched took — or, when
// nothing follows, with the completion.
func TestPatchedMarkerTravelsWithTheNextRequestOrTheCompletion(t *testing.T) {
	w := fakeWorker(t, WorkerOptions{})
	ended := endedRuns(w)
	var f *fakeServer
	// What the worker had sent right after each live Patched returned.
	recordsAfterPatched := make(chan int, 2)
	RegisterWorkflow(w, "then-send", func(ctx Context, _ any) (bool, error) {
		ok, err := Patched(ctx, "cents")
		recordsAfterPatched <- len(records(f.messages()))
		if err != nil {
			return false, err
		}
		_, err = Send(ctx, "other", "t", 1)
		return ok, err
	})
	RegisterWorkflow(w, "then-return", func(ctx Context, _ any) (bool, error) {
		ok, err := Patched(ctx, "cents")
		recordsAfterPatched <- len(records(f.messages()))
		return ok, err
	})
	f = startFake(t, w, okReply)

	f.dispatch("wf-send", "then-send")
	waitEnded(t, ended, "wf-send")
	f.dispatch("wf-return", "then-return")
	waitEnded(t, ended, "wf-return")
	if a, b := <-recordsAfterPatched, <-recordsAfterPatched; a != 0 || b != 1 {
		t.Fatalf("records sent when Patched returned: %d, then %d; want none of its own", a, b)
	}
	msgs := f.messages()
	var order []string
	for _, m := range msgs {
		switch {
		case m.GetRecordStep() != nil:
			rec := m.GetRecordStep()
			order = append(order, fmt.Sprintf("%s record %d %s %s", rec.GetWorkflowId(), rec.GetStepId(), rec.GetName(), outputJSON(t, rec.GetOutput())))
		case m.GetSendMessage() != nil:
			order = append(order, fmt.Sprintf("%s send %d", m.GetSendMessage().GetWorkflowId(), m.GetSendMessage().GetStepId()))
		case m.GetCompleteWorkflow() != nil:
			c := m.GetCompleteWorkflow()
			line := fmt.Sprintf("%s complete %s", c.GetWorkflowId(), outputJSON(t, c.GetOutput()))
			for _, rec := range c.GetSteps() {
				line += fmt.Sprintf(" +%d %s %s", rec.GetStepId(), rec.GetName(), outputJSON(t, rec.GetOutput()))
			}
			order = append(order, line)
		}
	}
	want := []string{
		`wf-send record 0 waymark.patch {"patch_id":"cents"}`,
		`wf-send send 1`,
		`wf-send complete true`,
		`wf-return complete true +0 waymark.patch {"patch_id":"cents"}`,
	}
	if !slices.Equal(order, want) {
		t.Fatalf("the worker sent\n%q\nwant\n%q", order, want)
	}
}

func outputJSON(t *testing.T, p *pb.Payload) string {
	t.Helper()
	raw, err := payloadJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}
