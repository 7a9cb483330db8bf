package waymark_test

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
	"github.com/waymark-dev/waymark/sdk-clients/go/internal/golden"
)

// The Go golden workflows run live, on the real server, record the committed golden histories
// — times, UUIDs and message ids aside — as the Rust ones do (integration-tests/tests/
// golden.rs): the Go copy makes the same calls in the same order. And a live run's history,
// read back with Client.History, replays offline to what the run returned, running nothing.
// (The offline replays of the committed files are internal/golden's test.)

// The scenarios run live: file, workflow, and for those the Rust test drives apart its input
// (else {"n": 41}) and what a client does once it is started. The other files are derived from
// these (see with_derived in integration-tests/tests/golden.rs).
var goldenLive = []struct {
	file, workflow string
	input          any
	drive          func(t *testing.T, c *waymark.Client, id string)
}{
	{file: "steps", workflow: "golden.steps"},
	{file: "sleep", workflow: "golden.sleep"},
	{file: "messages", workflow: "golden.messages"},
	{file: "events", workflow: "golden.events"},
	{file: "stream", workflow: "golden.stream"},
	{file: "child", workflow: "golden.child"},
	{file: "remote_retry", workflow: "golden.remote"},
	{file: "drawn", workflow: "golden.drawn"},
	{file: "patched", workflow: "golden.patched"},
	// After golden.remote: they call its remote step, whose attempts it counts.
	{file: "select", workflow: "golden.select"},
	{file: "wait_all", workflow: "golden.wait_all"},
	{file: "update", workflow: "golden.update", input: map[string]any{}, drive: sendGoldenUpdate},
}

// sendGoldenUpdate sends golden.update its update, as the Rust test does, and checks the answer.
func sendGoldenUpdate(t *testing.T, c *waymark.Client, id string) {
	opts := &waymark.UpdateOptions{UpdateID: "golden-update-1", Timeout: 120 * time.Second}
	answer, err := c.UpdateWorkflow(testCtx(t), id, "add", map[string]int{"n": 41}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !golden.EqualJSON(answer, json.RawMessage(`{"total": 42}`)) {
		t.Fatalf("the update was answered %s, not {\"total\": 42}", answer)
	}
}

// normalized blanks the values that differ from run to run, as the Rust test does.
func normalized(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, v := range x {
			switch k {
			case "wake_at_ms", "deadline_ms", "now_ms":
				m[k] = 0.0
			case "uuid", "message_id":
				m[k] = ""
			default:
				m[k] = normalized(v)
			}
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, v := range x {
			a[i] = normalized(v)
		}
		return a
	}
	return v
}

// generic is v as encoding/json reads it into an any.
func generic(t *testing.T, v any) any {
	t.Helper()
	text, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(text, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGoldenWorkflowsRecordTheGoldenHistories(t *testing.T) {
	w, queue := newWorker(t, waymark.WorkerOptions{})
	golden.Register(w)
	runWorker(t, w, queue)
	c := newClient(t)
	replayer := waymark.NewReplayer(golden.Register(waymark.NewWorker(waymark.WorkerOptions{Logger: slog.New(slog.DiscardHandler)})))
	for _, g := range goldenLive {
		t.Run(g.file, func(t *testing.T) {
			// The file as written, not as parsed: a recorded null output must stay a null.
			text, err := os.ReadFile(filepath.Join(golden.Dir(), g.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var committed struct{ History, Expect any }
			if err := json.Unmarshal(text, &committed); err != nil {
				t.Fatal(err)
			}
			// The id the Rust run used, so that the child's id, derived from it, is the same.
			id := "golden-" + g.file
			opts := &waymark.StartOptions{ID: id, Queue: queue}
			input := g.input
			if input == nil {
				input = map[string]int{"n": 41}
			}
			if _, err := c.Start(testCtx(t), g.workflow, input, opts); err != nil {
				t.Fatal(err)
			}
			if g.drive != nil {
				g.drive(t, c, id)
			}
			wf := await(t, c, id)
			if wf.Status != waymark.StatusSuccess {
				t.Fatalf("%s did not succeed: %s %v", g.workflow, wf.Status, wf.Failure)
			}
			returned := map[string]json.RawMessage{"returned": wf.Output}
			if got, want := normalized(generic(t, returned)), normalized(committed.Expect); !reflect.DeepEqual(got, want) {
				t.Errorf("returned %s; the committed file expects %v", wf.Output, committed.Expect)
			}
			live, err := c.History(testCtx(t), id)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := normalized(generic(t, live)), normalized(committed.History); !reflect.DeepEqual(got, want) {
				got, _ := json.Marshal(live)
				t.Errorf("a live run no longer records the committed history:\n got %s\nwant %s", got, text)
			}
			// What was recorded replays to what the run returned, running nothing.
			before := golden.Ran.Load()
			replayed, err := replayer.Replay(testCtx(t), live)
			if err != nil {
				t.Fatal(err)
			}
			if !golden.Same(waymark.Returned{Value: wf.Output}, replayed) {
				t.Errorf("its history replays to %v, not to the returned %s", replayed, wf.Output)
			}
			if n := golden.Ran.Load() - before; n != 0 {
				t.Errorf("the replay ran %d step functions", n)
			}
		})
	}
}
