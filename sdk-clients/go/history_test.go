package waymark

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// The replay cursor on its own: no server, no fake server, no run. What a dispatch carries is
// built here as the server would send it.

// recordedStep is step name recorded at position step with output js (JSON text).
func recordedStep(t *testing.T, step uint32, name, js string) *pb.Step {
	t.Helper()
	p, err := toPayload(json.RawMessage(js))
	if err != nil {
		t.Fatalf("recorded output %s: %v", js, err)
	}
	return &pb.Step{StepId: step, Name: name, Output: p}
}

func failedStep(step uint32, name, kind, message string) *pb.Step {
	return &pb.Step{StepId: step, Name: name, Failure: &pb.Failure{Kind: kind, Message: message}}
}

// Positions are handed out consecutively from 0, n at a time, in the order take is called.
func TestHistoryTakesPositionsInCallOrder(t *testing.T) {
	h := newHistory("wf-1", nil)
	var got []uint32
	for _, n := range []uint32{1, 2, 1, 0, 3, 1} {
		got = append(got, h.take(n))
	}
	if want := []uint32{0, 1, 3, 4, 4, 7}; !reflect.DeepEqual(got, want) {
		t.Fatalf("positions %v, want %v", got, want)
	}
	if h.take(1) != 8 {
		t.Fatalf("the cursor did not stand at 8 after taking 8 positions")
	}
}

// Goroutines taking positions at once each get their own: together they cover every position
// once, none is lost or given twice.
func TestHistoryPositionsAreNotSharedBetweenGoroutines(t *testing.T) {
	h := newHistory("wf-1", nil)
	const goroutines, rounds = 8, 200
	var mu sync.Mutex
	taken := map[uint32]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				n := uint32(1 + (g+i)%2) // a wait takes 2, a step 1
				first := h.take(n)
				mu.Lock()
				for p := first; p < first+n; p++ {
					taken[p]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := uint32(len(taken))
	for p := range total {
		if taken[p] != 1 {
			t.Fatalf("position %d was taken %d times", p, taken[p])
		}
	}
	if next := h.take(0); next != total {
		t.Fatalf("the cursor stands at %d after %d positions were taken", next, total)
	}
}

// A recorded output is returned as the T the call asks for, without running anything.
func TestHistoryReplaysARecordedOutput(t *testing.T) {
	type order struct {
		ID    string   `json:"id"`
		Items []string `json:"items"`
	}
	h := newHistory("wf-1", []*pb.Step{
		recordedStep(t, 0, "count", `42`),
		recordedStep(t, 1, "order", `{"id":"o-7","items":["a","b"]}`),
		{StepId: 2, Name: "nothing"}, // a step that returned nothing records no output
	})
	n, ok, err := replay[int](h, 0, "count")
	if !ok || err != nil || n != 42 {
		t.Fatalf("replay of count: %v, %v, %v", n, ok, err)
	}
	o, ok, err := replay[order](h, 1, "order")
	if !ok || err != nil || !reflect.DeepEqual(o, order{ID: "o-7", Items: []string{"a", "b"}}) {
		t.Fatalf("replay of order: %+v, %v, %v", o, ok, err)
	}
	p, ok, err := replay[*int](h, 2, "nothing")
	if !ok || err != nil || p != nil {
		t.Fatalf("replay of a step with no output: %v, %v, %v", p, ok, err)
	}
	if _, ok, err := replay[int](h, 1, "order"); !ok || err == nil {
		t.Fatalf("an object replayed as an int: ok %v, err %v", ok, err)
	}
}

// A recorded failure is the *StepError the live step returned, kind and message as recorded.
func TestHistoryReplaysARecordedFailure(t *testing.T) {
	h := newHistory("wf-1", []*pb.Step{
		failedStep(0, "charge", stepFailedKind, "card declined"),
		failedStep(1, "render", reasonPayloadTooLarge, "too big"),
	})
	_, ok, err := replay[string](h, 0, "charge")
	var se *StepError
	if !ok || !errors.As(err, &se) || *se != (StepError{Step: "charge", Message: "card declined", Reason: stepFailedKind}) {
		t.Fatalf("replay of a failed step: ok %v, err %#v", ok, err)
	}
	if err.Error() != `waymark: step "charge" failed: card declined` {
		t.Fatalf("message %q", err)
	}
	if _, _, err := replay[string](h, 1, "render"); !errors.Is(err, ErrPayloadTooLarge) {
		t.Fatalf("a step recorded as too large replayed as %v", err)
	}
}

// A position with nothing recorded — past the end of the history, or a gap in it — runs live:
// not recorded and no error, whatever the name.
func TestHistoryPositionsNotRecordedGoLive(t *testing.T) {
	h := newHistory("wf-1", []*pb.Step{recordedStep(t, 0, "a", `1`), recordedStep(t, 2, "c", `3`)})
	for _, step := range []uint32{1, 3, 1000} {
		if e, ok, err := h.at(step, "anything"); ok || err != nil || e != (entry{}) {
			t.Fatalf("position %d: %+v, %v, %v", step, e, ok, err)
		}
		if v, ok, err := replay[int](h, step, "anything"); ok || err != nil || v != 0 {
			t.Fatalf("replay at position %d: %v, %v, %v", step, v, ok, err)
		}
		if b, ok, err := h.builtin(step, sleepStep); ok || err != nil || b.fields != nil || b.null {
			t.Fatalf("built-in at position %d: %+v, %v, %v", step, b, ok, err)
		}
	}
}

// Another name at a recorded position is non-determinism, in the SDK's one message, however
// the position is read.
func TestHistoryADifferentNameIsNonDeterminism(t *testing.T) {
	h := newHistory("wf-1", []*pb.Step{recordedStep(t, 3, "charge", `1`)})
	want := `waymark: non-determinism: workflow "wf-1" called step "refund" at position 3, where its history records "charge"`
	check := func(how string, ok bool, err error) {
		t.Helper()
		if !ok || !errors.Is(err, ErrNonDeterminism) || err.Error() != want {
			t.Fatalf("%s: ok %v, err %v", how, ok, err)
		}
	}
	_, ok, err := h.at(3, "refund")
	check("at", ok, err)
	v, ok, err := replay[int](h, 3, "refund")
	check("replay", ok, err)
	if v != 0 {
		t.Fatalf("a non-deterministic replay returned the recorded value %d", v)
	}
	_, ok, err = h.builtin(3, "refund")
	check("builtin", ok, err)
	// A built-in step called where a step is recorded is caught the same way.
	_, ok, err = h.builtin(3, sleepStep)
	if !ok || !errors.Is(err, ErrNonDeterminism) || err.Error() != `waymark: non-determinism: workflow "wf-1" called step "waymark.sleep" at position 3, where its history records "charge"` {
		t.Fatalf("sleep at a step's position: ok %v, err %v", ok, err)
	}
	if failureOf(err).Kind != "NonDeterminism" {
		t.Fatalf("the workflow would fail with kind %q", failureOf(err).Kind)
	}
}

// A wait that timed out records null: it reads as recorded, null, with no fields. A missing
// output reads the same.
func TestHistoryRecordedNullIsATimedOutWait(t *testing.T) {
	h := newHistory("wf-1", []*pb.Step{
		recordedStep(t, 1, recvStep, `null`),
		{StepId: 3, Name: getEventStep},
	})
	for _, at := range []struct {
		step uint32
		name string
	}{{1, recvStep}, {3, getEventStep}} {
		b, ok, err := h.builtin(at.step, at.name)
		if !ok || err != nil || !b.null || len(b.fields) != 0 {
			t.Fatalf("%s at %d: %+v, %v, %v", at.name, at.step, b, ok, err)
		}
		if field[json.RawMessage](b.fields, "message") != nil {
			t.Fatalf("a null outcome has a message")
		}
	}
}

// Each built-in shape of worker.proto decodes to the fields the primitives read.
func TestHistoryDecodesBuiltinShapes(t *testing.T) {
	h := newHistory("wf-1", []*pb.Step{
		recordedStep(t, 0, sleepStep, `{"wake_at_ms": 1700000000123}`),
		recordedStep(t, 1, recvDeadlineStep, `{"deadline_ms": 1700000005000}`),
		recordedStep(t, 2, recvStep, `{"message": {"n": 1}}`),
		recordedStep(t, 3, sendStep, `{"message_id": "m-9"}`),
		recordedStep(t, 4, setEventStep, `{"key": "state"}`),
		recordedStep(t, 5, writeStreamStep, `{"offset": 17}`),
		recordedStep(t, 6, startChildStep, `{"workflow_id": "child-1"}`),
		recordedStep(t, 7, awaitChildStep, `{"status": "FAILED", "failure": {"kind": "Boom", "message": "no"}}`),
		recordedStep(t, 8, selectStep, `{"index": 2}`),
		recordedStep(t, 9, waitAllStep, `{"index": 0}`),
		recordedStep(t, 10, sleepStep, `[1, 2]`),
	})
	get := func(step uint32, name string) map[string]json.RawMessage {
		t.Helper()
		b, ok, err := h.builtin(step, name)
		if !ok || err != nil || b.null {
			t.Fatalf("%s at %d: %+v, %v, %v", name, step, b, ok, err)
		}
		return b.fields
	}
	if v := field[int64](get(0, sleepStep), "wake_at_ms"); v != 1700000000123 {
		t.Fatalf("wake_at_ms %d", v)
	}
	if v := field[int64](get(1, recvDeadlineStep), "deadline_ms"); v != 1700000005000 {
		t.Fatalf("deadline_ms %d", v)
	}
	if v := field[json.RawMessage](get(2, recvStep), "message"); string(v) != `{"n":1}` {
		t.Fatalf("message %s", v)
	}
	if v := field[string](get(3, sendStep), "message_id"); v != "m-9" {
		t.Fatalf("message_id %q", v)
	}
	if v := field[string](get(4, setEventStep), "key"); v != "state" {
		t.Fatalf("key %q", v)
	}
	if v := field[uint64](get(5, writeStreamStep), "offset"); v != 17 {
		t.Fatalf("offset %d", v)
	}
	if v := field[string](get(6, startChildStep), "workflow_id"); v != "child-1" {
		t.Fatalf("workflow_id %q", v)
	}
	child := get(7, awaitChildStep)
	if s, f := field[string](child, "status"), field[Failure](child, "failure"); s != "FAILED" || f != (Failure{Kind: "Boom", Message: "no"}) {
		t.Fatalf("await_child %q %+v", s, f)
	}
	if v := field[int](get(8, selectStep), "index"); v != 2 {
		t.Fatalf("select index %d", v)
	}
	if fields := get(9, waitAllStep); field[int](fields, "index") != 0 || len(fields) != 1 {
		t.Fatalf("wait_all %v", fields)
	}
	if v := field[int64](get(0, sleepStep), "missing"); v != 0 {
		t.Fatalf("a missing field read as %d", v)
	}
	// A built-in step recorded as something other than an object or null is an error, not a
	// silent zero.
	_, ok, err := h.builtin(10, sleepStep)
	if !ok || err == nil || err.Error() != "waymark: recorded waymark.sleep step is not an object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage" {
		t.Fatalf("an array recorded for a sleep: ok %v, err %v", ok, err)
	}
}

// waymark.now reads as its time in UTC and waymark.uuid as its string. Their one field is the
// whole record, so a record without it (or null) is an error rather than a zero value.
func TestHistoryDecodesNowAndUUID(t *testing.T) {
	h := newHistory("wf-1", []*pb.Step{
		recordedStep(t, 0, nowStep, `{"now_ms": 1700000000123}`),
		recordedStep(t, 1, uuidStep, `{"uuid": "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20"}`),
		recordedStep(t, 2, nowStep, `{}`),
		recordedStep(t, 3, uuidStep, `null`),
		recordedStep(t, 4, nowStep, `{"now_ms": "soon"}`),
	})
	now, ok, err := h.recordedNow(0)
	if !ok || err != nil || now != time.UnixMilli(1700000000123).UTC() {
		t.Fatalf("now: %v, %v, %v", now, ok, err)
	}
	id, ok, err := h.recordedUUID(1)
	if !ok || err != nil || id != "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20" {
		t.Fatalf("uuid: %q, %v, %v", id, ok, err)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{second(h.recordedNow(2)), "waymark: recorded waymark.now step has no now_ms"},
		{second(h.recordedUUID(3)), "waymark: recorded waymark.uuid step has no uuid"},
		{second(h.recordedNow(4)), "waymark: recorded waymark.now step's now_ms: json: cannot unmarshal string into Go value of type int64"},
		{second(h.recordedNow(1)), `waymark: non-determinism: workflow "wf-1" called step "waymark.now" at position 1, where its history records "waymark.uuid"`},
	} {
		if c.err == nil || c.err.Error() != c.want {
			t.Fatalf("got %v, want %s", c.err, c.want)
		}
	}
	if _, ok, err := h.recordedNow(5); ok || err != nil {
		t.Fatalf("nothing recorded at 5: %v, %v", ok, err)
	}
}

// second is the error of a (value, ok, error) result.
func second[T any](_ T, _ bool, err error) error { return err }

// The built-in names are a contract between the SDKs and the server: the list at the top of
// worker.proto is the source, and history.go defines every one of them, each once, no more.
func TestBuiltinNamesAreWorkerProtos(t *testing.T) {
	proto, err := os.ReadFile("../../proto/waymark/v1/worker.proto")
	if err != nil {
		t.Fatal(err)
	}
	text := string(proto)
	start, end := strings.Index(text, "Recorded steps of the built-in operations"), strings.Index(text, "service ")
	if start < 0 || end < start {
		t.Fatalf("worker.proto has no list of built-in steps")
	}
	documented := map[string]bool{}
	for _, name := range regexp.MustCompile(`waymark\.[a-z_]+(?:\.[a-z_]+)?`).FindAllString(text[start:end], -1) {
		documented[name] = true
	}
	// The constants of history.go whose value is a built-in name, read from its source: the
	// names are defined there once, with no list of them to keep in step.
	file, err := parser.ParseFile(token.NewFileSet(), "history.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	ast.Inspect(file, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, _ := strconv.Unquote(lit.Value); strings.HasPrefix(v, "waymark.") && !strings.ContainsAny(v, " %") {
				if defined[v] {
					t.Errorf("history.go defines %s twice", v)
				}
				defined[v] = true
			}
		}
		return true
	})
	if len(documented) != 16 || !reflect.DeepEqual(defined, documented) {
		t.Fatalf("history.go defines %v; worker.proto lists %v", keys(defined), keys(documented))
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// A position recorded twice in a dispatch keeps its last record.
func TestHistoryKeepsTheLastRecordOfAPosition(t *testing.T) {
	h := newHistory("wf-1", []*pb.Step{recordedStep(t, 0, "a", `1`), recordedStep(t, 0, "a", `2`)})
	if v, _, _ := replay[int](h, 0, "a"); v != 2 {
		t.Fatalf("replayed %d", v)
	}
}

// positionsOf is the sorted list of a set of positions, for messages.
func positionsOf(m map[uint32]bool) []uint32 {
	var out []uint32
	for p := range m {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// The cursor's answers, and which of them take the position.
func TestHistoryPatchedTakesThePositionOnlyForTheNewBranch(t *testing.T) {
	type answer struct {
		answer patchAnswer
		step   uint32
	}
	patched := func(h *history, id string) answer {
		t.Helper()
		a, step, err := h.patched(id)
		if err != nil {
			t.Fatalf("patched(%q): %v", id, err)
		}
		return answer{a, step}
	}
	// Live: nothing recorded at the next position; it is taken.
	h := newHistory("wf-1", []*pb.Step{recordedStep(t, 0, "charge", `1`)})
	h.take(1)
	if got := patched(h, "fix"); got != (answer{patchLive, 1}) {
		t.Fatalf("live: %v", got)
	}
	if next := h.take(0); next != 2 {
		t.Fatalf("live: the cursor stands at %d, want 2 (the marker's position taken)", next)
	}
	// Its own replay: the marker with this id is there; it is taken.
	h = newHistory("wf-1", []*pb.Step{recordedStep(t, 0, patchStep, `{"patch_id": "fix"}`), recordedStep(t, 1, "ship", `2`)})
	if got := patched(h, "fix"); got != (answer{patchReplayed, 0}) {
		t.Fatalf("its own replay: %v", got)
	}
	if next := h.take(1); next != 1 {
		t.Fatalf("its own replay: the next call takes %d, want 1", next)
	}
	// A run of old code: another step is there; nothing is taken, however often it is asked.
	h = newHistory("wf-1", []*pb.Step{recordedStep(t, 0, "ship", `2`)})
	for range 2 {
		if got := patched(h, "fix"); got.answer != patchOld {
			t.Fatalf("old history: %v", got)
		}
	}
	if next := h.take(1); next != 0 {
		t.Fatalf("old history: the next call takes %d, want 0", next)
	}
	// Another patch's marker: not this one; that one's own call then takes it.
	h = newHistory("wf-1", []*pb.Step{recordedStep(t, 0, patchStep, `{"patch_id": "older"}`)})
	if got := patched(h, "newer"); got.answer != patchOld {
		t.Fatalf("another patch's marker: %v", got)
	}
	if got := patched(h, "older"); got != (answer{patchReplayed, 0}) {
		t.Fatalf("the marker's own patch: %v", got)
	}
}

// A marker that is not {"patch_id": "…"} is a malformed history, as a built-in record of
// another shape is, and takes nothing.
func TestHistoryPatchedMalformedMarkerIsAnError(t *testing.T) {
	for _, c := range []struct{ output, want string }{
		{`{}`, "waymark: recorded waymark.patch step has no patch_id"},
		{`null`, "waymark: recorded waymark.patch step has no patch_id"},
		{`{"patch_id": 7}`, "waymark: recorded waymark.patch step's patch_id: json: cannot unmarshal number into Go value of type string"},
		{`"fix"`, "waymark: recorded waymark.patch step is not an object: json: cannot unmarshal string into Go value of type map[string]json.RawMessage"},
	} {
		h := newHistory("wf-1", []*pb.Step{recordedStep(t, 0, patchStep, c.output)})
		_, _, err := h.patched("fix")
		if err == nil || err.Error() != c.want {
			t.Errorf("marker %s: %v, want %s", c.output, err, c.want)
		}
		if next := h.take(0); next != 0 {
			t.Errorf("marker %s: took a position", c.output)
		}
	}
}

// Goroutines asking patched and taking positions at once: the look and the take are one, so
// every position is given once — a patched that looked at a position another call then took
// would answer with a position given twice. A stress test: a look and a take apart fail it in
// nearly every run on two cores or more, not in all.
func TestHistoryPatchedAndTakeFromGoroutinesShareNoPosition(t *testing.T) {
	h := newHistory("wf-1", nil)
	const goroutines, rounds = 8, 20000
	var mu sync.Mutex
	taken := map[uint32]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range rounds {
				var step uint32
				if g%2 == 0 {
					a, s, err := h.patched("fix")
					if err != nil || a != patchLive {
						t.Errorf("patched: %v, %v", a, err)
						return
					}
					step = s
				} else {
					step = h.take(1)
				}
				mu.Lock()
				taken[step]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(taken) != goroutines*rounds {
		t.Fatalf("%d distinct positions for %d calls", len(taken), goroutines*rounds)
	}
	for step, n := range taken {
		if n != 1 || step >= goroutines*rounds {
			t.Fatalf("position %d given %d times", step, n)
		}
	}
}
