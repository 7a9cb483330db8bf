package waymark

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Now and UUID on a run with no connection (see replayRun): replayed from the history, or
// drawn live and held, never sent.

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// heldJSON is each held record's position, name and output as compact JSON.
func heldJSON(t *testing.T, r *run) []string {
	t.Helper()
	var out []string
	for _, rec := range r.deferred {
		raw, err := payloadJSON(rec.GetOutput())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d %s %s", rec.GetStepId(), rec.GetName(), raw))
	}
	return out
}

// Recorded values come back as recorded, each at the position its call order gives it,
// between ordinary steps, without drawing anything; the first call past the history draws.
func TestNowAndUUIDReplayWhatIsRecorded(t *testing.T) {
	const id = "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20"
	r := replayRun(
		recordedStep(t, 0, nowStep, `{"now_ms": 1700000000123}`),
		recordedStep(t, 1, "s", `"v"`),
		recordedStep(t, 2, uuidStep, `{"uuid": "`+id+`"}`),
		recordedStep(t, 3, nowStep, `{"now_ms": 1700000009999}`),
	)
	now, err := Now(r)
	if err != nil || !now.Equal(time.UnixMilli(1700000000123)) || now.Location() != time.UTC {
		t.Fatalf("Now: %v (%v), %v", now, now.Location(), err)
	}
	if v, err := Step(r, "s", func(context.Context) (string, error) { return "live", nil }); v != "v" || err != nil {
		t.Fatalf("Step: %q, %v", v, err)
	}
	if got, err := UUID(r); got != id || err != nil {
		t.Fatalf("UUID: %q, %v", got, err)
	}
	if later, err := Now(r); err != nil || later.UnixMilli() != 1700000009999 {
		t.Fatalf("second Now: %v, %v", later, err)
	}
	if len(r.deferred) != 0 {
		t.Fatalf("a replay recorded %v", heldJSON(t, r))
	}
	// Past the history: drawn now, held at the next position.
	if got, err := UUID(r); err != nil || !uuidV4.MatchString(got) || got == id {
		t.Fatalf("UUID past the history: %q, %v", got, err)
	}
	if held := heldJSON(t, r); len(held) != 1 || !strings.HasPrefix(held[0], "4 waymark.uuid ") {
		t.Fatalf("held %v", held)
	}
}

// Live calls hold records of exactly worker.proto's shapes, which a replay of them reads back
// as the very values the live calls returned.
func TestNowAndUUIDRecordWhatTheyReturn(t *testing.T) {
	live := replayRun()
	before := time.Now().Add(-time.Millisecond)
	now, err := Now(live)
	if err != nil || now.Before(before) || now.After(time.Now()) || now.Location() != time.UTC || now.Nanosecond()%int(time.Millisecond) != 0 {
		t.Fatalf("Now: %v, %v", now, err)
	}
	a, errA := UUID(live)
	b, errB := UUID(live)
	if errA != nil || errB != nil || !uuidV4.MatchString(a) || !uuidV4.MatchString(b) || a == b {
		t.Fatalf("UUIDs %q (%v), %q (%v)", a, errA, b, errB)
	}
	want := []string{
		`0 waymark.now {"now_ms":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`,
		`1 waymark.uuid {"uuid":"` + a + `"}`,
		`2 waymark.uuid {"uuid":"` + b + `"}`,
	}
	held := heldJSON(t, live)
	for i := range want {
		if i >= len(held) || held[i] != want[i] {
			t.Fatalf("held %q, want %q", held, want)
		}
	}
	for _, rec := range live.deferred {
		if rec.GetAttempts() != 1 || rec.GetFailure() != nil {
			t.Fatalf("record %v", rec)
		}
	}

	var steps []*pb.Step
	for _, rec := range live.deferred {
		steps = append(steps, &pb.Step{StepId: rec.GetStepId(), Name: rec.GetName(), Output: rec.GetOutput()})
	}
	replayed := replayRun(steps...)
	again, err := Now(replayed)
	if err != nil || again != now {
		t.Fatalf("Now replayed %v, %v; live %v", again, err, now)
	}
	if x, err := UUID(replayed); x != a || err != nil {
		t.Fatalf("UUID replayed %q, %v; live %q", x, err, a)
	}
	if y, err := UUID(replayed); y != b || err != nil {
		t.Fatalf("UUID replayed %q, %v; live %q", y, err, b)
	}
}

// Another step recorded where Now or UUID is called is the standard non-determinism error
// (the cursor's), and nothing is drawn or held.
func TestNowAndUUIDAtAnotherStepAreNonDeterminism(t *testing.T) {
	r := replayRun(
		recordedStep(t, 0, "charge", `1`),
		recordedStep(t, 1, nowStep, `{"now_ms": 1}`),
	)
	_, err := Now(r)
	if !errors.Is(err, ErrNonDeterminism) || err.Error() != `waymark: non-determinism: workflow "wf-1" called step "waymark.now" at position 0, where its history records "charge"` {
		t.Fatalf("Now over a step: %v", err)
	}
	id, err := UUID(r)
	if !errors.Is(err, ErrNonDeterminism) || err.Error() != `waymark: non-determinism: workflow "wf-1" called step "waymark.uuid" at position 1, where its history records "waymark.now"` || id != "" {
		t.Fatalf("UUID over a Now: %q, %v", id, err)
	}
	if failureOf(err).Kind != "NonDeterminism" {
		t.Fatalf("the workflow would fail with kind %q", failureOf(err).Kind)
	}
	if len(r.deferred) != 0 {
		t.Fatalf("held %v", heldJSON(t, r))
	}
}

// A stopped run gets its cause from a live Now or UUID and holds nothing, as from a live step;
// what its history records still replays, as a step's does. A dropped run takes no position.
func TestNowAndUUIDOnAStoppedRun(t *testing.T) {
	r := replayRun(recordedStep(t, 0, uuidStep, `{"uuid": "recorded"}`))
	ctx, cancel := context.WithCancelCause(context.Background())
	r.Context, r.cancel = ctx, cancel
	r.stop(ErrCancelled)
	if id, err := UUID(r); id != "recorded" || err != nil {
		t.Fatalf("recorded UUID on a cancelled run: %q, %v", id, err)
	}
	if _, err := Now(r); !errors.Is(err, ErrCancelled) {
		t.Fatalf("live Now on a cancelled run: %v", err)
	}
	if _, err := Step(r, "s", func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, ErrCancelled) {
		t.Fatalf("live Step on a cancelled run: %v", err)
	}
	if len(r.deferred) != 0 {
		t.Fatalf("a cancelled run held %v", heldJSON(t, r))
	}

	d := replayRun(recordedStep(t, 0, nowStep, `{"now_ms": 1}`))
	dropped := fmt.Errorf("%w: test", ErrDropped)
	d.dropped.Store(&dropped)
	if _, err := Now(d); !errors.Is(err, ErrDropped) {
		t.Fatalf("Now on a dropped run: %v", err)
	}
	if next := d.hist.take(0); next != 0 {
		t.Fatalf("a dropped run took %d positions", next)
	}
}
