package waymark_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// Replay before deploy, end to end as a user's CI does it: a workflow runs live under its v1
// code; an operator exports its history with the CLI (`waymark workflow export ID`) into a
// file; the file, read back, replays offline against changed code. The v1 code replays to what
// the live run returned; a step inserted before a recorded one is NonDeterminism, named both
// ways; the same insertion behind Patched replays the old branch; a workflow renamed in the
// code is ErrUnknownWorkflow. No replay sends anything (replayOf checks) or runs a step.

const deployDemo = "deploy-demo"

// deployRan counts the step functions of deploy-demo's versions that ran: the live run's two,
// and none in any replay.
var deployRan atomic.Int64

type deployOrder struct {
	ID int `json:"id"`
}

type deployHold struct {
	Held int `json:"held"`
}

func deployReserve(context.Context) (deployHold, error) {
	deployRan.Add(1)
	return deployHold{Held: 3}, nil
}

func deployCharge(context.Context) (string, error) {
	deployRan.Add(1)
	return "ch_7", nil
}

func deployAudit(context.Context) (string, error) {
	deployRan.Add(1)
	return "audited", nil
}

// deployVersion registers deploy-demo's code under name: reserve, then (should audit say so)
// audit, then charge.
func deployVersion(name string, audit func(ctx waymark.Context) (bool, error)) func(*waymark.Worker) {
	return func(w *waymark.Worker) {
		waymark.RegisterWorkflow(w, name, func(ctx waymark.Context, _ deployOrder) (map[string]any, error) {
			held, err := waymark.Step(ctx, "reserve", deployReserve)
			if err != nil {
				return nil, err
			}
			doAudit, err := audit(ctx)
			if err != nil {
				return nil, err
			}
			if doAudit {
				if _, err := waymark.Step(ctx, "audit", deployAudit); err != nil {
					return nil, err
				}
			}
			charged, err := waymark.Step(ctx, "charge", deployCharge)
			if err != nil {
				return nil, err
			}
			return map[string]any{"reserved": held, "charged": charged}, nil
		})
	}
}

// The versions of the code: v1 ran live; v2 inserts an audit step between reserve and charge,
// unguarded or behind Patched("add-audit").
var (
	deployV1       = deployVersion(deployDemo, func(waymark.Context) (bool, error) { return false, nil })
	deployV2Unsafe = deployVersion(deployDemo, func(waymark.Context) (bool, error) { return true, nil })
	deployV2Safe   = deployVersion(deployDemo, func(ctx waymark.Context) (bool, error) {
		return waymark.Patched(ctx, "add-audit")
	})
)

// exportWithCLI runs `waymark workflow export id --server …` against the test server, as an
// operator would, and returns its stdout.
func exportWithCLI(t *testing.T, id string) []byte {
	t.Helper()
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The test server has neither TLS nor keys: the address is all the CLI needs.
	cmd := exec.CommandContext(ctx, bin, "workflow", "export", id, "--server", "http://"+server.addr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("waymark workflow export %s: %v\n%s", id, err, stderr.String())
	}
	return stdout.Bytes()
}

// sameJSON is whether a and b are equal as JSON values.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func TestDeployCheckReplaysACLIExportedHistoryAgainstChangedCode(t *testing.T) {
	// No WAYMARK_* connection setting of the caller's reaches the CLI: only --server.
	clearConnectionEnv(t)

	// 1. v1 runs live.
	w, queue := newWorker(t, waymark.WorkerOptions{})
	deployV1(w)
	runWorker(t, w, queue)
	c := newClient(t)
	ranBefore := deployRan.Load()
	id := start(t, c, deployDemo, queue, deployOrder{ID: 7})
	wf := await(t, c, id)
	if wf.Status != waymark.StatusSuccess {
		t.Fatalf("%s did not succeed: %s %v", deployDemo, wf.Status, wf.Failure)
	}
	const want = `{"reserved": {"held": 3}, "charged": "ch_7"}`
	if !sameJSON(wf.Output, []byte(want)) {
		t.Fatalf("the live run returned %s, want %s", wf.Output, want)
	}
	if n := deployRan.Load() - ranBefore; n != 2 {
		t.Fatalf("the live run ran %d step functions, want 2 (reserve, charge)", n)
	}

	// 2. The operator exports its history with the CLI; CI keeps it as a file and reads it back.
	stdout := exportWithCLI(t, id)
	var exported waymark.RecordedHistory
	if err := json.Unmarshal(stdout, &exported); err != nil {
		t.Fatalf("the export is not a history: %v\n%s", err, stdout)
	}
	var names []string
	for _, s := range exported.Steps {
		names = append(names, s.Name)
	}
	if exported.WorkflowID != id || exported.WorkflowName != deployDemo || !sameJSON(exported.Input, []byte(`{"id": 7}`)) ||
		!reflect.DeepEqual(names, []string{"reserve", "charge"}) {
		t.Fatalf("the export is not this run's history: %s", stdout)
	}
	// The CLI's export is the history Client.History reads.
	viaClient, err := c.History(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(generic(t, &exported), generic(t, viaClient)) {
		got, _ := json.Marshal(viaClient)
		t.Errorf("the CLI exported %s; Client.History reads %s", stdout, got)
	}
	path := filepath.Join(t.TempDir(), "h.json")
	if err := os.WriteFile(path, stdout, 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h waymark.RecordedHistory
	if err := json.Unmarshal(text, &h); err != nil {
		t.Fatal(err)
	}

	// 3. Offline replays of the file. Each replays its own copy, so no case sees another's.
	replay := func(t *testing.T, register func(*waymark.Worker)) (waymark.Replayed, error) {
		t.Helper()
		hist := h
		hist.Steps = append([]waymark.RecordedStep(nil), h.Steps...)
		before := deployRan.Load()
		t.Cleanup(func() {
			if n := deployRan.Load() - before; n != 0 {
				t.Errorf("the replay ran %d step functions", n)
			}
		})
		return replayOf(t, register).Replay(testCtx(t), &hist)
	}

	t.Run("v1 returns what the live run returned", func(t *testing.T) {
		got, err := replay(t, deployV1)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := got.(waymark.Returned)
		if !ok || !sameJSON(r.Value, wf.Output) || !sameJSON(r.Value, []byte(want)) {
			t.Fatalf("replayed to %v, want returned %s", got, wf.Output)
		}
	})

	t.Run("v2 with an unguarded new step is NonDeterminism naming both steps", func(t *testing.T) {
		got, err := replay(t, deployV2Unsafe)
		if err != nil {
			t.Fatal(err)
		}
		f, ok := got.(waymark.Failed)
		if !ok || f.Kind != "NonDeterminism" || !errors.Is(f.Err, waymark.ErrNonDeterminism) {
			t.Fatalf("replayed to %v, want a NonDeterminism failure", got)
		}
		// The step the code asked for, and the one the history records at that position.
		for _, name := range []string{`"audit"`, `"charge"`} {
			if !strings.Contains(f.Message, name) {
				t.Errorf("the message does not name %s: %q", name, f.Message)
			}
		}
		if want := `called step "audit" at position 1, where its history records "charge"`; !strings.Contains(f.Message, want) {
			t.Errorf("the message %q does not say %q", f.Message, want)
		}
	})

	t.Run("v2 with the new step behind Patched replays the old branch", func(t *testing.T) {
		got, err := replay(t, deployV2Safe)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := got.(waymark.Returned)
		if !ok || !sameJSON(r.Value, wf.Output) {
			t.Fatalf("replayed to %v, want returned %s", got, wf.Output)
		}
	})

	t.Run("a renamed workflow is ErrUnknownWorkflow", func(t *testing.T) {
		got, err := replay(t, deployVersion("deploy-demo-renamed", func(waymark.Context) (bool, error) { return false, nil }))
		if !errors.Is(err, waymark.ErrUnknownWorkflow) || !strings.Contains(err.Error(), `"deploy-demo"`) {
			t.Fatalf("replayed to %v, %v; want ErrUnknownWorkflow naming %q", got, err, deployDemo)
		}
	})
}
