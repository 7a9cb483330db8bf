package waymark_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
)

// The harness for servers started with TLS or authentication: each test that needs one starts
// its own, on certificates made for it by waymark-test-certs (nothing secret is checked in).

// testCerts writes a throwaway CA, server and client certificates into a directory of the
// test's: ca.pem, server.pem, server.key (for localhost and 127.0.0.1), client.pem and
// client.key (signed by ca.pem), and other-ca.pem (a CA that signed none of them).
func testCerts(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("WAYMARK_TEST_CERTS")
	if bin == "" {
		server, err := serverBinary()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(filepath.Dir(server), "waymark-test-certs")
	}
	dir := t.TempDir()
	out, err := exec.Command(bin, dir).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, dir, err, out)
	}
	return dir
}

// clearConnectionEnv keeps the environment's connection settings out of a test.
func clearConnectionEnv(t *testing.T) {
	for _, name := range []string{"WAYMARK_SERVER", "WAYMARK_TLS_CA", "WAYMARK_TLS_CERT", "WAYMARK_TLS_KEY", "WAYMARK_API_KEY", "WAYMARK_NAMESPACE", "WAYMARK_INSECURE"} {
		t.Setenv(name, "")
	}
}

// secureConfig says how to start a server.
type secureConfig struct {
	tls      bool // --tls-cert, --tls-key
	clientCA bool // --tls-client-ca: clients must present a certificate signed by ca.pem
	auth     bool // --auth, with an admin key made at start
}

type secureServer struct {
	*serverProcess
	cfg   secureConfig
	certs string
	// The admin key the server made at start (with auth).
	adminKey string
}

// startSecureServer starts a server with cfg's TLS and authentication, stopped when the test
// ends (its log shown if the test failed).
func startSecureServer(t *testing.T, cfg secureConfig) *secureServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "waymark-go-sdk-secure-")
	if err != nil {
		t.Fatal(err)
	}
	addr, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	// Its address, for the options it is probed with, until the process is up.
	s := &secureServer{cfg: cfg, serverProcess: &serverProcess{addr: addr}}
	var flags []string
	if cfg.tls {
		s.certs = testCerts(t)
		flags = append(flags, "--tls-cert", s.cert("server.pem"), "--tls-key", s.cert("server.key"))
		if cfg.clientCA {
			flags = append(flags, "--tls-client-ca", s.cert("ca.pem"))
		}
	}
	keyFile := filepath.Join(dir, "admin.key")
	if cfg.auth {
		flags = append(flags, "--auth", "--init-admin-key-file", keyFile)
	}
	p, err := launchServer(dir, addr, flags, s.options(""))
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatal(err)
	}
	s.serverProcess = p
	t.Cleanup(func() {
		if t.Failed() {
			if text, err := os.ReadFile(filepath.Join(dir, "server.log")); err == nil {
				t.Logf("server log:\n%s", text)
			}
		}
		p.stop()
	})
	if cfg.auth {
		eventually(t, "the admin key file", func() (bool, error) {
			text, err := os.ReadFile(keyFile)
			s.adminKey = strings.TrimSpace(string(text))
			return err == nil && s.adminKey != "", err
		})
	}
	return s
}

func (s *secureServer) cert(name string) string { return filepath.Join(s.certs, name) }

// options are a client's options for this server: its CA trusted, the client certificate
// presented when the server asks for one, and apiKey.
func (s *secureServer) options(apiKey string) waymark.ClientOptions {
	o := waymark.ClientOptions{Server: s.url(), APIKey: apiKey}
	if s.cfg.tls {
		o.TLS.CAFile = s.cert("ca.pem")
		if s.cfg.clientCA {
			o.TLS.CertFile, o.TLS.KeyFile = s.cert("client.pem"), s.cert("client.key")
		}
	}
	return o
}

// workerOptions are options for a worker of this server, on a queue of its own (returned).
func (s *secureServer) workerOptions(t *testing.T, apiKey string) (waymark.WorkerOptions, string) {
	o := s.options(apiKey)
	queue := unique("q")
	return waymark.WorkerOptions{Server: o.Server, TLS: o.TLS, APIKey: apiKey, Queues: []string{queue}, Logger: testLogger(t)}, queue
}

func (s *secureServer) url() string {
	if s.cfg.tls {
		return "https://" + s.addr
	}
	return "http://" + s.addr
}

func (s *secureServer) client(t *testing.T, apiKey string) *waymark.Client {
	t.Helper()
	c, err := waymark.NewClientWithOptions(s.options(apiKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// cli runs `waymark args...` against this server as its admin, and returns its stdout.
func (s *secureServer) cli(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := serverBinary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	env := []string{"WAYMARK_SERVER=" + s.url(), "WAYMARK_API_KEY=" + s.adminKey}
	if s.cfg.tls {
		env = append(env, "WAYMARK_TLS_CA="+s.cert("ca.pem"))
		if s.cfg.clientCA {
			env = append(env, "WAYMARK_TLS_CERT="+s.cert("client.pem"), "WAYMARK_TLS_KEY="+s.cert("client.key"))
		}
	}
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("waymark %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// createKey makes a key of role with `waymark key create` and returns it.
func (s *secureServer) createKey(t *testing.T, role string) string {
	t.Helper()
	out := s.cli(t, "key", "create", "--role", role, "--name", unique("go-sdk-"+role))
	key, _, _ := strings.Cut(out, "\n")
	key = strings.TrimSpace(key)
	if !strings.HasPrefix(key, "wmk_") {
		t.Fatalf("waymark key create printed no key on its first line (%d bytes of output)", len(out))
	}
	return key
}

// revokeKey revokes key with `waymark key revoke`.
func (s *secureServer) revokeKey(t *testing.T, key string) {
	t.Helper()
	s.cli(t, "key", "revoke", keyID(t, key))
}

// keyID is the public part of a key, wmk_<key_id>_<secret>.
func keyID(t *testing.T, key string) string {
	t.Helper()
	id, _, ok := strings.Cut(strings.TrimPrefix(key, "wmk_"), "_")
	if !ok || id == "" {
		t.Fatal("the key is not of the form wmk_<key_id>_<secret>")
	}
	return id
}

// runUntilReturns runs w in the background; the returned channel gets what Run returned. The
// worker is stopped (and waited for) when the test ends, if it is still running.
func runUntilReturns(t *testing.T, w *waymark.Worker) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	returned := make(chan error, 1)
	go func() {
		err := w.Run(ctx)
		done <- err
		returned <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("worker did not stop")
		}
	})
	return returned
}

// runResult waits (generously) for what a worker's Run returns.
func runResult(t *testing.T, returned <-chan error) error {
	t.Helper()
	select {
	case err := <-returned:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("the worker's Run did not return")
		return nil
	}
}

// wantRefusal fails the test unless err is an *Error with code and reason, and without key
// anywhere in its text.
func wantRefusal(t *testing.T, err error, reason, key string) {
	t.Helper()
	var werr *waymark.Error
	if !errors.As(err, &werr) {
		t.Fatalf("got %v (%T), want a *waymark.Error with reason %s", err, err, reason)
	}
	if werr.Reason != reason || werr.Code.String() != codeName(reason) {
		t.Fatalf("got %v (code %s, reason %s), want reason %s", err, werr.Code, werr.Reason, reason)
	}
	if key != "" && strings.Contains(err.Error(), key) {
		t.Fatal("the error shows the API key")
	}
}

// codeName is the gRPC code's name of a reason spelled like one (UNAUTHENTICATED →
// Unauthenticated, PERMISSION_DENIED → PermissionDenied).
func codeName(reason string) string {
	var b strings.Builder
	for word := range strings.SplitSeq(strings.ToLower(reason), "_") {
		if word != "" {
			b.WriteString(strings.ToUpper(word[:1]) + word[1:])
		}
	}
	return b.String()
}
