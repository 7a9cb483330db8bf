package waymark_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"google.golang.org/grpc/codes"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// registerShout registers a workflow that runs one step, for the tests to see a workflow run
// end to end over the connection under test.
func registerShout(w *waymark.Worker) {
	waymark.RegisterWorkflow(w, "shout", func(ctx waymark.Context, s string) (string, error) {
		return waymark.Step(ctx, "upper", func(context.Context) (string, error) { return s + "!", nil })
	})
}

// runShout starts shout on queue with c and waits for its output.
func runShout(t *testing.T, c *waymark.Client, queue string) {
	t.Helper()
	id := start(t, c, "shout", queue, "hey")
	wf := await(t, c, id)
	if out, err := waymark.Output[string](wf); err != nil || out != "hey!" {
		t.Fatalf("workflow %s: %s, output %q (%v)", id, wf.Status, out, err)
	}
}

// runWorkerOn runs w until the test ends, once its queue exists.
func runWorkerOn(t *testing.T, c *waymark.Client, w *waymark.Worker, queue string) <-chan error {
	t.Helper()
	returned := runUntilReturns(t, w)
	eventually(t, "the worker to connect", func() (bool, error) {
		select {
		case err := <-returned:
			t.Fatalf("the worker's Run returned %v", err)
		default:
		}
		_, err := c.GetQueue(testCtx(t), queue)
		return err == nil, err
	})
	return returned
}

// wantRefusedHandshake fails the test unless err is the client's handshake failing: a call
// the server never answered (UNAVAILABLE).
func wantRefusedHandshake(t *testing.T, err error) {
	t.Helper()
	var werr *waymark.Error
	if !errors.As(err, &werr) || werr.Code != codes.Unavailable {
		t.Fatalf("got %v, want the TLS handshake refused (UNAVAILABLE)", err)
	}
	t.Logf("refused as expected: %v", err)
}

func TestTLS(t *testing.T) {
	clearConnectionEnv(t)
	s := startSecureServer(t, secureConfig{tls: true})

	t.Run("a worker runs a workflow over TLS", func(t *testing.T) {
		// The client names the CA by file with an https:// address; the worker gives it as PEM
		// text with no scheme, which TLS options make TLS.
		c := s.client(t, "")
		ca, err := os.ReadFile(s.cert("ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		opts, queue := s.workerOptions(t, "")
		opts.Server, opts.TLS = s.addr, waymark.TLSOptions{CA: ca}
		w := waymark.NewWorker(opts)
		registerShout(w)
		runWorkerOn(t, c, w, queue)
		runShout(t, c, queue)
	})

	t.Run("a client trusting another CA is refused", func(t *testing.T) {
		c, err := waymark.NewClientWithOptions(waymark.ClientOptions{Server: s.addr, TLS: waymark.TLSOptions{CAFile: s.cert("other-ca.pem")}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Delay is not retried on UNAVAILABLE: its first answer is the answer.
		_, err = c.Delay(testCtx(t), "wf", 0)
		wantRefusedHandshake(t, err)
	})
}

func TestMutualTLS(t *testing.T) {
	clearConnectionEnv(t)
	s := startSecureServer(t, secureConfig{tls: true, clientCA: true})

	t.Run("a client without a certificate is refused", func(t *testing.T) {
		c, err := waymark.NewClientWithOptions(waymark.ClientOptions{Server: s.url(), TLS: waymark.TLSOptions{CAFile: s.cert("ca.pem")}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.Delay(testCtx(t), "wf", 0)
		wantRefusedHandshake(t, err)
	})

	t.Run("a client and a worker with certificates work", func(t *testing.T) {
		c := s.client(t, "")
		opts, queue := s.workerOptions(t, "")
		w := waymark.NewWorker(opts)
		registerShout(w)
		runWorkerOn(t, c, w, queue)
		runShout(t, c, queue)
	})
}
