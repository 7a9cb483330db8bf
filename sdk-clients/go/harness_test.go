package waymark_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// One real server process serves the package's tests, on a fresh SQLite database and a free
// port; each test keeps to its own queue, so tests do not take each other's workflows. Its
// recovery settings are short so the crash test does not wait long.
var server *serverProcess

func TestMain(m *testing.M) {
	s, err := startServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start the Waymark server:", err)
		os.Exit(1)
	}
	server = s
	// The server refuses starts of names no worker registered: this worker registers the
	// names the client tests start, on a queue they never use, so those stay ENQUEUED.
	ctx, cancel := context.WithCancel(context.Background())
	idle := waymark.NewWorker(waymark.WorkerOptions{Server: s.addr, Queues: []string{"go-sdk-idle"}, Logger: slog.New(slog.DiscardHandler)})
	waymark.RegisterWorkflow(idle, "noworker", func(waymark.Context, any) (any, error) { return nil, nil })
	idleDone := make(chan struct{})
	go func() {
		defer close(idleDone)
		_ = idle.Run(ctx)
	}()
	if err := untilRegistered(s.addr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cancel()
	// The idle worker is done before its server goes.
	select {
	case <-idleDone:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "the idle worker did not stop")
	}
	s.stop()
	os.Exit(code)
}

type serverProcess struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	log  *os.File
	// Closed once the process has exited (and been waited for).
	exited chan struct{}
}

// serverBinary is WAYMARK_BIN, else the debug build at the repository's root.
func serverBinary() (string, error) {
	if bin := os.Getenv("WAYMARK_BIN"); bin != "" {
		return bin, nil
	}
	bin, err := filepath.Abs("../../target/debug/waymark")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no server binary at %s (build it, or set WAYMARK_BIN): %w", bin, err)
	}
	return bin, nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startServer() (*serverProcess, error) {
	dir, err := os.MkdirTemp("", "waymark-go-sdk-")
	if err != nil {
		return nil, err
	}
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	return startServerAt(dir, addr)
}

// startServerAt starts a server on the database in dir, listening on addr: a restart on the
// same dir and addr is the same server coming back.
func startServerAt(dir, addr string) (*serverProcess, error) {
	return launchServer(dir, addr, nil, waymark.ClientOptions{Server: addr})
}

// launchServer starts a server on the database in dir, listening on addr, with extra flags
// (TLS, auth), and waits until it answers a client made with ready: a call that succeeds, or
// that the server refuses for want of a key, says it is up.
func launchServer(dir, addr string, extra []string, ready waymark.ClientOptions) (*serverProcess, error) {
	bin, err := serverBinary()
	if err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	args := append([]string{"server", "--listen", addr,
		"--database-url", "sqlite:" + filepath.Join(dir, "waymark.db"),
		// A free port for the console: the usual one, beside --listen, may be another server's.
		"--console-listen", "127.0.0.1:0",
		"--recovery-grace", "500ms", "--worker-lease", "3s", "--heartbeat-interval", "500ms",
		"--recovery-interval", "200ms", "--dispatch-poll-interval", "100ms"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &serverProcess{addr: addr, cmd: cmd, dir: dir, log: logFile, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	c, err := waymark.NewClientWithOptions(ready)
	if err != nil {
		s.stop()
		return nil, err
	}
	defer c.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.ListQueues(ctx)
		cancel()
		if err == nil || waymark.IsReason(err, "UNAUTHENTICATED") {
			return s, nil
		}
		select {
		case <-s.exited:
			text, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			s.stop()
			return nil, fmt.Errorf("the server (%s) exited: %s", strings.Join(args, " "), text)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("server at %s not ready: %w", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// untilRegistered waits until the idle worker's names are known to the server.
func untilRegistered(addr string) error {
	c, err := waymark.NewClient(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Start(context.Background(), "noworker", nil, &waymark.StartOptions{Queue: "go-sdk-idle"})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the idle worker did not register: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *serverProcess) stop() {
	s.kill()
	if os.Getenv("WAYMARK_KEEP_TEST_DIR") == "" {
		_ = os.RemoveAll(s.dir)
	}
}

// kill ends the server process with SIGKILL, keeping its database.
func (s *serverProcess) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	_ = s.log.Close()
}

// unique makes names that no other test (or run) uses.
func unique(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:10])
}

func newClient(t *testing.T) *waymark.Client {
	t.Helper()
	c, err := waymark.NewClient(server.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testLogger writes the worker's logs to the test's log, shown when it fails.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = testWriter{}

// newWorker makes a worker on a queue of its own; register on it, then call runWorker.
func newWorker(t *testing.T, opts waymark.WorkerOptions) (*waymark.Worker, string) {
	t.Helper()
	queue := unique("q")
	opts.Server = server.addr
	opts.Queues = append(opts.Queues, queue)
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	return waymark.NewWorker(opts), queue
}

// runWorker runs w until the test ends, once it is connected: the queue it serves exists
// (a worker's hello creates the queues it names, and registers its workflow names). The test
// ends only once Run has returned, so nothing the worker started logs to the test's log after.
func runWorker(t *testing.T, w *waymark.Worker, queue string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("worker did not stop")
		}
	})
	c := newClient(t)
	eventually(t, "the worker to connect", func() (bool, error) {
		_, err := c.GetQueue(testCtx(t), queue)
		return err == nil, err
	})
}

// eventually polls cond until it holds, failing the test at the deadline.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last error: %v)", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// await waits for a workflow to finish and returns it.
func await(t *testing.T, c *waymark.Client, id string) *waymark.Workflow {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wf, err := c.Await(ctx, id)
	if err != nil {
		// What it got to, for the failure's report.
		if wf, gerr := c.Get(context.Background(), id); gerr == nil {
			t.Logf("workflow %s is %s; steps %v", id, wf.Status, stepNames(t, c, id))
		}
		for w, err := range c.All(context.Background(), &waymark.ListOptions{CreatedAfter: time.Now().Add(-time.Minute)}) {
			if err == nil && w.ParentID == id {
				t.Logf("child %s (%s) is %s on %s", w.ID, w.Name, w.Status, w.Queue)
			}
		}
		t.Fatalf("await %s: %v", id, err)
	}
	return wf
}

// newQueue creates a queue of the test's own.
func newQueue(t *testing.T, c *waymark.Client) string {
	t.Helper()
	name := unique("q")
	if _, err := c.CreateQueue(testCtx(t), name, waymark.QueueLimits{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// start starts a workflow on queue and returns its id.
func start(t *testing.T, c *waymark.Client, name, queue string, input any) string {
	t.Helper()
	s, err := c.Start(testCtx(t), name, input, &waymark.StartOptions{Queue: queue})
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return s.ID
}

// stepNames lists a workflow's recorded step names, in order.
func stepNames(t *testing.T, c *waymark.Client, id string) []string {
	t.Helper()
	steps, err := c.Steps(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range steps {
		names = append(names, s.Name)
	}
	return names
}
