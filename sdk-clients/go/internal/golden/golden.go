// Package golden holds the golden workflows in Go: the same code as
// integration-tests/src/golden.rs (each function's comment there is the specification) — the
// same workflow names, the same calls in the same order with the same step names, topics, keys
// and inputs, the same results — so that their recorded histories (contract/histories/)
// replay here to the outcomes they record. Only the SDK's tests use it: the offline replay of
// every golden file (golden_test.go here, which needs no server) and the live runs
// (golden_live_test.go in the SDK's package).
package golden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Ran counts the step functions that ran, local and remote: a replay must leave it at zero.
var Ran atomic.Int64

// Register registers every golden workflow (and the remote step they call) on w.
func Register(w *waymark.Worker) *waymark.Worker {
	waymark.RegisterWorkflow(w, "golden.steps", steps)
	waymark.RegisterWorkflow(w, "golden.sleep", sleep)
	waymark.RegisterWorkflow(w, "golden.messages", messages)
	waymark.RegisterWorkflow(w, "golden.events", events)
	waymark.RegisterWorkflow(w, "golden.stream", stream)
	waymark.RegisterWorkflow(w, "golden.child", child)
	waymark.RegisterWorkflow(w, "golden.child_body", childBody)
	waymark.RegisterWorkflow(w, "golden.remote", remote)
	waymark.RegisterWorkflow(w, "golden.drawn", drawn)
	waymark.RegisterWorkflow(w, "golden.patched", patched)
	waymark.RegisterWorkflow(w, "golden.select", selectFirst)
	waymark.RegisterWorkflow(w, "golden.wait_all", waitAll)
	waymark.RegisterWorkflow(w, "golden.gated", gated)
	waymark.RegisterWorkflow(w, "golden.update", update)
	waymark.RegisterStep(w, "golden.flaky", flaky)
	return w
}

// object is the JSON object the golden workflows take and return.
type object = map[string]any

// n is input["n"] as an integer, 0 when there is none or it is not one (Rust:
// `input["n"].as_i64().unwrap_or(0)`).
func n(input any) int64 {
	m, _ := input.(object)
	f, ok := m["n"].(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0
	}
	return int64(f)
}

// Input {"n": N}. Step "add" returns N + 1; step "fail" fails with "boom" (no retries), which
// the workflow catches. Returns {"sum": N + 1, "caught": "boom"}.
func steps(ctx waymark.Context, input any) (any, error) {
	sum, err := waymark.Step(ctx, "add", func(context.Context) (int64, error) {
		Ran.Add(1)
		return n(input) + 1, nil
	})
	if err != nil {
		return nil, err
	}
	got, err := waymark.Step(ctx, "fail", func(context.Context) (int64, error) {
		Ran.Add(1)
		return 0, errors.New("boom")
	})
	var failed *waymark.StepError
	switch {
	case errors.As(err, &failed):
	case err != nil && ctx.Err() != nil:
		// Cancelled, taken over, the end of a replayed history: an interruption, which ends
		// the workflow's context, is not this workflow's to catch.
		return nil, err
	case err != nil:
		return nil, waymark.Fail("Unexpected", "%v", err)
	default:
		return nil, waymark.Fail("Unexpected", "step \"fail\" returned %d", got)
	}
	return object{"sum": sum, "caught": failed.Message}, nil
}

// Takes one update named "add" (60 s); step "apply" returns its args' N + 1, and the update is
// answered with {"total": N + 1}. Returns {"update": <its id>, "total": N + 1}, or
// {"update": null} when no update came.
func update(ctx waymark.Context, _ any) (any, error) {
	u, ok, err := waymark.RecvUpdate[any](ctx, "add", 60*time.Second)
	if err != nil {
		return nil, err
	}
	if !ok {
		return object{"update": nil}, nil
	}
	total, err := waymark.Step(ctx, "apply", func(context.Context) (int64, error) {
		Ran.Add(1)
		return n(u.Args) + 1, nil
	})
	if err != nil {
		return nil, err
	}
	if err := waymark.AnswerUpdate(ctx, u.ID, object{"total": total}); err != nil {
		return nil, err
	}
	return object{"update": u.ID, "total": total}, nil
}

// Sleeps 10 ms; returns "slept".
func sleep(ctx waymark.Context, _ any) (any, error) {
	if err := waymark.Sleep(ctx, 10*time.Millisecond); err != nil {
		return nil, err
	}
	return "slept", nil
}

// Sends {"hi": 1} to itself on topic "t", receives on "t" (60 s), then receives on "none"
// (10 ms, times out). Returns {"got": {"hi": 1}, "none": null}.
func messages(ctx waymark.Context, _ any) (any, error) {
	if _, err := waymark.Send(ctx, ctx.WorkflowID(), "t", object{"hi": 1}); err != nil {
		return nil, err
	}
	// A receive that got nothing leaves its value nil: null, as Rust's None.
	got, _, err := waymark.Recv[any](ctx, "t", 60*time.Second)
	if err != nil {
		return nil, err
	}
	none, _, err := waymark.Recv[any](ctx, "none", 10*time.Millisecond)
	if err != nil {
		return nil, err
	}
	return object{"got": got, "none": none}, nil
}

// Sets its event "k" to 7, then reads it back (1 s). Returns 7.
func events(ctx waymark.Context, _ any) (any, error) {
	if err := waymark.SetEvent(ctx, "k", 7); err != nil {
		return nil, err
	}
	v, _, err := waymark.GetEvent[any](ctx, ctx.WorkflowID(), "k", time.Second)
	return v, err
}

// Writes "a" then "b" to its stream "s" and closes it. Returns the offset "b" was written at.
func stream(ctx waymark.Context, _ any) (any, error) {
	if _, err := waymark.WriteStream(ctx, "s", "a"); err != nil {
		return nil, err
	}
	b, err := waymark.WriteStream(ctx, "s", "b")
	if err != nil {
		return nil, err
	}
	if err := waymark.CloseStream(ctx, "s"); err != nil {
		return nil, err
	}
	return b, nil
}

// Starts "golden.child_body" with {"n": 3} (its id derived by the server) and awaits it.
// Returns the child's output.
func child(ctx waymark.Context, _ any) (json.RawMessage, error) {
	id, err := waymark.StartChild(ctx, "golden.child_body", object{"n": 3}, nil)
	if err != nil {
		return nil, err
	}
	return waymark.AwaitChild[json.RawMessage](ctx, id)
}

// Input {"n": N}: step "double" returns 2N; returns it.
func childBody(ctx waymark.Context, input any) (int64, error) {
	return waymark.Step(ctx, "double", func(context.Context) (int64, error) {
		Ran.Add(1)
		return 2 * n(input), nil
	})
}

// Calls the remote step "golden.flaky" with {"fail_times": 1} and up to 3 attempts (50 ms
// backoff): its first attempt fails, its second succeeds. Returns the step's output.
func remote(ctx waymark.Context, _ any) (json.RawMessage, error) {
	retry := waymark.RetryPolicy{MaxAttempts: 3, InitialInterval: 50 * time.Millisecond, Backoff: 2, MaxInterval: time.Second}
	return waymark.CallStep[json.RawMessage](ctx, "golden.flaky", object{"fail_times": 1}, waymark.WithRetry(retry))
}

// Reads the time and draws a UUID. Returns {"now_ms": …, "uuid": "…"}.
func drawn(ctx waymark.Context, _ any) (any, error) {
	now, err := waymark.Now(ctx)
	if err != nil {
		return nil, err
	}
	id, err := waymark.UUID(ctx)
	if err != nil {
		return nil, err
	}
	return object{"now_ms": now.UnixMilli(), "uuid": id}, nil
}

// Asks Patched("golden-fix"). The new branch runs step "fixed", which returns "new"; the old
// one runs step "unfixed", which returns "old". Returns {"branch": <what the step returned>}.
func patched(ctx waymark.Context, _ any) (any, error) {
	fixed, err := waymark.Patched(ctx, "golden-fix")
	if err != nil {
		return nil, err
	}
	name, value := "unfixed", "old"
	if fixed {
		name, value = "fixed", "new"
	}
	branch, err := waymark.Step(ctx, name, func(context.Context) (string, error) {
		Ran.Add(1)
		return value, nil
	})
	if err != nil {
		return nil, err
	}
	return object{"branch": branch}, nil
}

// Calls the remote step "golden.flaky" with {"fail_times": 0} (the server's retry policy), then
// starts "golden.gated" (its id derived by the server), and waits for the first of the two to
// finish, the step first: the step wins (index 0), as the child cannot finish before it gets the
// message this workflow sends it only after the wait. Then reads the step's result, sends the
// child "go" on topic "go", and awaits the child. Returns
// {"winner": 0, "step": "ok after 0 failures", "child": "go"}.
func selectFirst(ctx waymark.Context, _ any) (any, error) {
	step, err := waymark.StartStep(ctx, "golden.flaky", object{"fail_times": 0})
	if err != nil {
		return nil, err
	}
	child, err := waymark.StartChild(ctx, "golden.gated", object{}, nil)
	if err != nil {
		return nil, err
	}
	winner, err := waymark.WaitFirst(ctx, step, waymark.WorkflowRef(child))
	if err != nil {
		return nil, err
	}
	result, err := waymark.StepResult[json.RawMessage](ctx, step)
	if err != nil {
		return nil, err
	}
	if _, err := waymark.Send(ctx, child, "go", "go"); err != nil {
		return nil, err
	}
	got, err := waymark.AwaitChild[json.RawMessage](ctx, child)
	if err != nil {
		return nil, err
	}
	return object{"winner": winner, "step": result, "child": got}, nil
}

// Calls the remote step "golden.flaky" with {"fail_times": 0} (the server's retry policy) and
// starts "golden.gated" (its id derived by the server), as golden.select does; reads the step's
// result (so the step has finished before the child can), sends the child "go" on topic "go",
// then waits for both to finish, the child first. The wait records the last to finish, the
// child (index 0; a tie would go to the lower index, the child too). Then awaits the child and
// reads the step's result again. Returns {"results": ["go", "ok after 0 failures"]}.
func waitAll(ctx waymark.Context, _ any) (any, error) {
	step, err := waymark.StartStep(ctx, "golden.flaky", object{"fail_times": 0})
	if err != nil {
		return nil, err
	}
	child, err := waymark.StartChild(ctx, "golden.gated", object{}, nil)
	if err != nil {
		return nil, err
	}
	if _, err := waymark.StepResult[json.RawMessage](ctx, step); err != nil {
		return nil, err
	}
	if _, err := waymark.Send(ctx, child, "go", "go"); err != nil {
		return nil, err
	}
	if err := waymark.WaitAll(ctx, waymark.WorkflowRef(child), step); err != nil {
		return nil, err
	}
	got, err := waymark.AwaitChild[json.RawMessage](ctx, child)
	if err != nil {
		return nil, err
	}
	result, err := waymark.StepResult[json.RawMessage](ctx, step)
	if err != nil {
		return nil, err
	}
	return object{"results": []json.RawMessage{got, result}}, nil
}

// Receives on topic "go" (60 s). Returns what it got (null when nothing came).
func gated(ctx waymark.Context, _ any) (any, error) {
	got, _, err := waymark.Recv[any](ctx, "go", 60*time.Second)
	return got, err
}

// flakyCalls counts the remote step's attempts in this process.
var flakyCalls atomic.Uint64

// The remote step: fails its first fail_times attempts in this process, then returns
// "ok after N failures". (Only a live run calls it; a replay reads its recorded result.)
// Every attempt counts, so golden.remote runs before the others that call it.
func flaky(_ context.Context, input struct {
	FailTimes uint64 `json:"fail_times"`
}) (string, error) {
	Ran.Add(1)
	call := flakyCalls.Add(1) - 1
	if call < input.FailTimes {
		return "", fmt.Errorf("planned failure %d", call+1)
	}
	return fmt.Sprintf("ok after %d failures", input.FailTimes), nil
}

// File is one golden file: what it shows, a recorded history, and what replaying it must
// come to — one of {"returned": V}, {"failed": "KIND"}, {"suspended_at": N}.
type File struct {
	About   string                     `json:"about"`
	History waymark.RecordedHistory    `json:"history"`
	Expect  map[string]json.RawMessage `json:"expect"`
}

// Dir is contract/histories/, found from this file's place in the repository, so that tests
// in any package of the module find it.
func Dir() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..", "..", "contract", "histories")
}

// Read reads every golden file in dir, by name without ".json", in name order: files added
// later are read too.
func Read(dir string) (names []string, files map[string]File, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	files = map[string]File{}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, nil, err
		}
		var f File
		if err := json.Unmarshal(text, &f); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		names, files[name] = append(names, name), f
	}
	sort.Strings(names)
	return names, files, nil
}

// Want is the outcome the file's expect names.
func (f File) Want() (waymark.Replayed, error) {
	if len(f.Expect) != 1 {
		return nil, fmt.Errorf("expect names %d outcomes, not one", len(f.Expect))
	}
	var key string
	var raw json.RawMessage
	for key, raw = range f.Expect {
	}
	switch key {
	case "returned":
		return waymark.Returned{Value: raw}, nil
	case "failed":
		var kind string
		err := json.Unmarshal(raw, &kind)
		return waymark.Failed{Kind: kind}, err
	case "suspended_at":
		var step uint32
		err := json.Unmarshal(raw, &step)
		return waymark.Suspended{StepID: step}, err
	}
	return nil, fmt.Errorf("expect names an outcome this test does not know: %q", key)
}

// Same reports whether a replay came to the outcome want names: the same value returned (equal
// as JSON), a failure of the same kind, or a suspension at the same position.
func Same(want, got waymark.Replayed) bool {
	switch w := want.(type) {
	case waymark.Returned:
		g, ok := got.(waymark.Returned)
		return ok && EqualJSON(w.Value, g.Value)
	case waymark.Failed:
		g, ok := got.(waymark.Failed)
		return ok && g.Kind == w.Kind
	case waymark.Suspended:
		g, ok := got.(waymark.Suspended)
		return ok && g.StepID == w.StepID
	}
	return false
}

// EqualJSON reports whether two JSON texts are the same value (key order and spacing aside).
func EqualJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
