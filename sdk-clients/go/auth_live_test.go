package waymark_test

import (
	"context"
	"testing"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// registerStreamer registers a workflow that writes its input to stream "out", for a reader
// to follow (a server-streaming call).
func registerStreamer(w *waymark.Worker) {
	waymark.RegisterWorkflow(w, "streamer", func(ctx waymark.Context, s string) (string, error) {
		if _, err := waymark.WriteStream(ctx, "out", s); err != nil {
			return "", err
		}
		if err := waymark.CloseStream(ctx, "out"); err != nil {
			return "", err
		}
		return s, nil
	})
}

// readAll follows a workflow's stream to its end.
func readAll(c *waymark.Client, ctx context.Context, id string) ([]string, error) {
	var out []string
	for e, err := range c.ReadStream(ctx, id, "out", 0) {
		if err != nil {
			return out, err
		}
		out = append(out, string(e.Value))
	}
	return out, nil
}

// Against a server started with --auth, over plaintext (a key works without TLS on loopback):
// each role does what it may, and is refused the rest.
func TestAPIKeys(t *testing.T) {
	clearConnectionEnv(t)
	s := startSecureServer(t, secureConfig{auth: true})
	admin := s.client(t, s.adminKey)
	clientKey := s.createKey(t, "client")
	client := s.client(t, clientKey)

	// A worker with a worker key, serving the workflows the other subtests start.
	workerKey := s.createKey(t, "worker")
	opts, queue := s.workerOptions(t, workerKey)
	w := waymark.NewWorker(opts)
	registerShout(w)
	registerStreamer(w)
	runWorkerOn(t, admin, w, queue)

	t.Run("a worker key runs workflows", func(t *testing.T) {
		runShout(t, client, queue)
	})

	t.Run("no key is UNAUTHENTICATED", func(t *testing.T) {
		c := s.client(t, "")
		_, err := c.ListQueues(testCtx(t))
		wantRefusal(t, err, "UNAUTHENTICATED", "")
		_, err = readAll(c, testCtx(t), "wf")
		wantRefusal(t, err, "UNAUTHENTICATED", "")
		wopts, _ := s.workerOptions(t, "")
		err = runResult(t, runUntilReturns(t, waymark.NewWorker(wopts)))
		wantRefusal(t, err, "UNAUTHENTICATED", "")
	})

	t.Run("an unknown key is UNAUTHENTICATED", func(t *testing.T) {
		forged := "wmk_" + keyID(t, clientKey) + "_notthesecret"
		_, err := s.client(t, forged).Get(testCtx(t), "wf")
		wantRefusal(t, err, "UNAUTHENTICATED", forged)
	})

	t.Run("a reader key reads but cannot cancel", func(t *testing.T) {
		id := start(t, client, "streamer", queue, "news")
		await(t, client, id)
		readerKey := s.createKey(t, "reader")
		reader := s.client(t, readerKey)
		wf, err := reader.Get(testCtx(t), id)
		if err != nil || wf.Status != waymark.StatusSuccess {
			t.Fatalf("reader's get: %v, %v", wf, err)
		}
		got, err := readAll(reader, testCtx(t), id)
		if err != nil || len(got) != 1 || got[0] != `"news"` {
			t.Fatalf("reader's stream: %q, %v", got, err)
		}
		_, err = reader.Cancel(testCtx(t), id)
		wantRefusal(t, err, "PERMISSION_DENIED", readerKey)
	})

	t.Run("a client key cannot serve as a worker", func(t *testing.T) {
		wopts, _ := s.workerOptions(t, clientKey)
		cw := waymark.NewWorker(wopts)
		registerShout(cw)
		err := runResult(t, runUntilReturns(t, cw))
		wantRefusal(t, err, "PERMISSION_DENIED", clientKey)
	})

	t.Run("revoking a worker's key stops it", func(t *testing.T) {
		key := s.createKey(t, "worker")
		wopts, wqueue := s.workerOptions(t, key)
		w := waymark.NewWorker(wopts)
		registerShout(w)
		returned := runWorkerOn(t, admin, w, wqueue)
		runShout(t, client, wqueue)
		s.revokeKey(t, key)
		err := runResult(t, returned)
		wantRefusal(t, err, "UNAUTHENTICATED", key)
	})
}

// Everything from the environment: WAYMARK_SERVER, WAYMARK_TLS_CA, WAYMARK_TLS_CERT,
// WAYMARK_TLS_KEY, WAYMARK_API_KEY and WAYMARK_NAMESPACE, against a server with mutual TLS and
// keys; the client and the worker are given no options but the worker's queue.
func TestConnectionFromTheEnvironment(t *testing.T) {
	clearConnectionEnv(t)
	s := startSecureServer(t, secureConfig{tls: true, clientCA: true, auth: true})
	workerKey := s.createKey(t, "worker")
	clientKey := s.createKey(t, "client")

	// Without a scheme: the TLS variables make it TLS.
	t.Setenv("WAYMARK_SERVER", s.addr)
	t.Setenv("WAYMARK_TLS_CA", s.cert("ca.pem"))
	t.Setenv("WAYMARK_TLS_CERT", s.cert("client.pem"))
	t.Setenv("WAYMARK_TLS_KEY", s.cert("client.key"))
	t.Setenv("WAYMARK_NAMESPACE", "default")

	// A worker reads the environment when it is made, and a client too: each gets its key.
	t.Setenv("WAYMARK_API_KEY", workerKey)
	queue := unique("q")
	w := waymark.NewWorker(waymark.WorkerOptions{Queues: []string{queue}, Logger: testLogger(t)})
	registerShout(w)

	t.Setenv("WAYMARK_API_KEY", clientKey)
	c, err := waymark.NewClient("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	runWorkerOn(t, c, w, queue)
	runShout(t, c, queue)
}
