package waymark_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// The looper of internal/testworker: its input.
type looper struct {
	N     int  `json:"n"`
	Until int  `json:"until"`
	Wait  bool `json:"wait"`
}

// A workflow that loops by continuing as new keeps its id — its awaiter, its inbox — while each
// run starts with an empty history and each ended run is kept as `<id>/run-<n>` with its own
// steps; a worker process killed -9 between runs loses nothing and no run's step runs twice.
// (integration-tests/tests/continue_as_new.rs, with this SDK's worker.)
func TestALoopingWorkflowContinuesAsNewUnderItsID(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "testworker")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/testworker").CombinedOutput(); err != nil {
		t.Fatalf("build the test worker: %v\n%s", err, out)
	}
	queue, effects := unique("q"), filepath.Join(dir, "effects.txt")
	worker := func(id string) *exec.Cmd {
		cmd := exec.Command(bin)
		// Parked at once: a run waiting for its message is DELAYED, held by no worker.
		cmd.Env = append(os.Environ(), "WAYMARK_SERVER="+server.addr, "WORKER_ID="+id, "WORKER_QUEUE="+queue,
			"SIDE_EFFECTS="+effects, "PARK_AFTER=1ns")
		cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	first := worker("loop-a")
	eventually(t, "the first worker to connect", func() (bool, error) {
		_, err := c.GetQueue(ctx, queue)
		return err == nil, err
	})

	const id = "loop-go"
	if _, err := c.Start(ctx, "looper", looper{N: 0, Until: 3, Wait: true}, &waymark.StartOptions{ID: id, Queue: queue}); err != nil {
		t.Fatal(err)
	}
	type awaited struct {
		wf  *waymark.Workflow
		err error
	}
	awaiter := make(chan awaited, 1)
	go func() {
		wf, err := c.Await(ctx, id)
		awaiter <- awaited{wf, err}
	}()
	if _, err := c.Send(ctx, id, "go", 0, nil); err != nil {
		t.Fatal(err)
	}
	// The first run ends and the second waits for its message: the worker is killed -9 there.
	var second *waymark.Workflow
	eventually(t, "the second run waiting", func() (bool, error) {
		wf, err := c.Get(ctx, id)
		second = wf
		return err == nil && wf.Run == 1 && wf.Status == waymark.StatusDelayed, err
	})
	var in looper
	if err := json.Unmarshal(second.Input, &in); err != nil || in != (looper{N: 1, Until: 3, Wait: true}) {
		t.Fatalf("the second run's input %s (%v)", second.Input, err)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	worker("loop-b")
	// Messages sent to the workflow's id reach whichever run is current, read or not yet.
	for i := 1; i < 4; i++ {
		if _, err := c.Send(ctx, id, "go", i, nil); err != nil {
			t.Fatal(err)
		}
	}
	done := await(t, c, id)
	if out, err := waymark.Output[int](done); err != nil || out != 3 || done.Run != 3 || done.ContinuedAsWorkflowID != "" {
		t.Fatalf("the workflow: %+v (output %d, %v)", done, out, err)
	}
	got := <-awaiter
	if got.err != nil || got.wf.ID != id || got.wf.Status != waymark.StatusSuccess {
		t.Fatalf("an awaiter from before the first run got %+v, %v", got.wf, got.err)
	}

	// The current run's history is its own: the recv (its deadline, then the message) and one
	// tick.
	if names := stepNames(t, c, id); strings.Join(names, " ") != "waymark.recv.deadline waymark.recv tick" {
		t.Fatalf("the last run's steps %v", names)
	}
	// Every ended run kept its own, exactly once each: nothing ran twice after the kill.
	var ended []*waymark.Workflow
	for wf, err := range c.All(ctx, &waymark.ListOptions{Statuses: []waymark.Status{waymark.StatusContinuedAsNew}, Name: "looper"}) {
		if err != nil {
			t.Fatal(err)
		}
		ended = append(ended, wf)
	}
	slices.SortFunc(ended, func(a, b *waymark.Workflow) int { return strings.Compare(a.ID, b.ID) })
	var ids []string
	for _, wf := range ended {
		ids = append(ids, wf.ID)
	}
	if strings.Join(ids, " ") != "loop-go/run-0 loop-go/run-1 loop-go/run-2" {
		t.Fatalf("ended runs %v", ids)
	}
	for i, wf := range ended {
		if wf.Run != uint32(i) || wf.ContinuedAsWorkflowID != id || wf.Status != waymark.StatusContinuedAsNew || !wf.Status.Terminal() || wf.Name != "looper" {
			t.Errorf("ended run %d: %+v", i, wf)
		}
		var in looper
		if err := json.Unmarshal(wf.Input, &in); err != nil || in != (looper{N: i, Until: 3, Wait: true}) {
			t.Errorf("ended run %d's input %s (%v)", i, wf.Input, err)
		}
		steps, err := c.Steps(ctx, wf.ID)
		if err != nil || len(steps) != 3 {
			t.Fatalf("%s's steps %+v (%v)", wf.ID, steps, err)
		}
		if steps[2].Name != "tick" || string(steps[2].Output) != fmt.Sprint(i) {
			t.Errorf("%s's third step %s = %s, want tick = %d", wf.ID, steps[2].Name, steps[2].Output, i)
		}
	}
	if wf, err := c.Get(ctx, "loop-go/run-1"); err != nil || wf.Status != waymark.StatusContinuedAsNew || wf.ContinuedAsWorkflowID != id {
		t.Fatalf("get loop-go/run-1: %+v %v", wf, err)
	}
	data, err := os.ReadFile(effects)
	if err != nil {
		t.Fatal(err)
	}
	if want := "tick 0 loop-a\ntick 1 loop-b\ntick 2 loop-b\ntick 3 loop-b\n"; string(data) != want {
		t.Fatalf("ticks run:\n%s\nwant:\n%s", data, want)
	}
}
