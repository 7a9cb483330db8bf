package waymark_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// A worker process killed with SIGKILL mid-workflow loses nothing: after the recovery grace
// another worker process replays the workflow from its checkpoints and finishes it, and every
// step ran exactly once across the two.
// conformance: replay_after_kill
func TestCrashedWorkerIsReplacedAndEveryStepRunsOnce(t *testing.T) {
	c, ctx := newClient(t), testCtx(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "testworker")
	if out, err := exec.Command("go", "build", "-o", bin, "./internal/testworker").CombinedOutput(); err != nil {
		t.Fatalf("build the test worker: %v\n%s", err, out)
	}
	queue, effects := unique("q"), filepath.Join(dir, "effects.txt")
	worker := func(id string) *exec.Cmd {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "WAYMARK_SERVER="+server.addr, "WORKER_ID="+id, "WORKER_QUEUE="+queue, "SIDE_EFFECTS="+effects)
		cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}

	first := worker("crash-a")
	eventually(t, "the first worker to connect", func() (bool, error) {
		_, err := c.GetQueue(ctx, queue)
		return err == nil, err
	})
	id := start(t, c, "crashy", queue, 5)
	// Steps s-0..s-2 are recorded and the workflow waits for its message: nothing is running
	// between a step and its record, so a kill now must not run any step again.
	eventually(t, "the workflow to reach its wait", func() (bool, error) {
		names := stepNames(t, c, id)
		return slices.Contains(names, "waymark.recv.deadline"), nil
	})
	if wf, err := c.Get(ctx, id); err != nil || wf.Status != waymark.StatusPending || wf.WorkerID != "crash-a" {
		t.Fatalf("before the kill: %+v %v", wf, err)
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if _, err := c.Send(ctx, id, "go", "continue", nil); err != nil {
		t.Fatal(err)
	}
	worker("crash-b")

	wf := await(t, c, id)
	if out, err := waymark.Output[string](wf); err != nil || out != "crash-b" || wf.RecoveryAttempts < 1 {
		t.Fatalf("output %q (%v), recovery attempts %d", out, err, wf.RecoveryAttempts)
	}
	data, err := os.ReadFile(effects)
	if err != nil {
		t.Fatal(err)
	}
	want := "s-0 crash-a\ns-1 crash-a\ns-2 crash-a\ns-3 crash-b\ns-4 crash-b\n"
	if string(data) != want {
		t.Fatalf("side effects:\n%s\nwant:\n%s", data, want)
	}
	if names := stepNames(t, c, id); strings.Join(names, " ") != "s-0 s-1 s-2 waymark.recv.deadline waymark.recv s-3 s-4" {
		t.Fatalf("steps %v", names)
	}
}
