package waymark_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	waymark "github.com/waymark-dev/waymark/sdk-clients/go"
	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Tests of what the SDK puts on the wire for TLS and API keys, against a gRPC server in this
// process: it records the metadata of every call, and its worker stream refuses or breaks as a
// test says. The same behaviour against the real server is in auth_live_test.go.

// goServer is a gRPC server whose WorkflowService implements nothing (a call that reaches it
// is UNIMPLEMENTED) and whose WorkerService's Connect is the test's.
type goServer struct {
	addr string

	mu sync.Mutex
	// The metadata of each call, by full method name.
	calls map[string][]metadata.MD
	// Connect streams opened so far.
	connects atomic.Int32
}

const (
	getMethod        = "/waymark.v1.WorkflowService/GetWorkflow"
	readStreamMethod = "/waymark.v1.WorkflowService/ReadStream"
	connectMethod    = "/waymark.v1.WorkerService/Connect"
)

type connectFunc func(n int32, stream grpc.BidiStreamingServer[pb.WorkerMessage, pb.ServerMessage]) error

type goWorkers struct {
	pb.UnimplementedWorkerServiceServer
	s       *goServer
	connect connectFunc
}

func (w *goWorkers) Connect(stream grpc.BidiStreamingServer[pb.WorkerMessage, pb.ServerMessage]) error {
	n := w.s.connects.Add(1)
	if w.connect == nil {
		return status.Error(codes.Unimplemented, "no workers here")
	}
	return w.connect(n, stream)
}

// startGoServer serves until the test ends, with TLS when creds is not nil.
func startGoServer(t *testing.T, creds credentials.TransportCredentials, connect connectFunc) *goServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &goServer{addr: l.Addr().String(), calls: map[string][]metadata.MD{}}
	record := func(ctx context.Context, method string) {
		md, _ := metadata.FromIncomingContext(ctx)
		s.mu.Lock()
		s.calls[method] = append(s.calls[method], md)
		s.mu.Unlock()
	}
	opts := []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			record(ctx, info.FullMethod)
			return handler(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			record(ss.Context(), info.FullMethod)
			return handler(srv, ss)
		}),
	}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	g := grpc.NewServer(opts...)
	pb.RegisterWorkflowServiceServer(g, pb.UnimplementedWorkflowServiceServer{})
	pb.RegisterWorkerServiceServer(g, &goWorkers{s: s, connect: connect})
	go func() { _ = g.Serve(l) }()
	t.Cleanup(g.Stop)
	return s
}

// metadataOf is the metadata of the calls to method so far.
func (s *goServer) metadataOf(method string) []metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// refuse is a status as the real server makes it: the code, and an ErrorInfo with the reason.
func refuse(code codes.Code, reason, message string) error {
	st, err := status.New(code, message).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "waymark.dev"})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

// wantMetadata fails the test unless every call to method carried the key and namespace
// (none of them when empty).
func wantMetadata(t *testing.T, s *goServer, method, key, namespace string) {
	t.Helper()
	calls := s.metadataOf(method)
	if len(calls) == 0 {
		t.Fatalf("no call to %s reached the server", method)
	}
	for _, md := range calls {
		auth := md.Get("authorization")
		switch {
		case key == "" && len(auth) != 0:
			t.Errorf("%s carried authorization metadata without a key", method)
		case key != "" && (len(auth) != 1 || auth[0] != "Bearer "+key):
			t.Errorf("%s carried authorization %d values, not the Bearer key", method, len(auth))
		}
		ns := md.Get("waymark-namespace")
		switch {
		case namespace == "" && len(ns) != 0:
			t.Errorf("%s carried namespace %q without one set", method, ns)
		case namespace != "" && (len(ns) != 1 || ns[0] != namespace):
			t.Errorf("%s carried namespace %q, want %q", method, ns, namespace)
		}
	}
}

// callEverything makes a unary call, a server-streaming one and a worker stream with these
// options; the worker's stream is refused as UNAUTHENTICATED, which ends its Run.
func callEverything(t *testing.T, s *goServer, client waymark.ClientOptions, worker waymark.WorkerOptions) {
	t.Helper()
	c, err := waymark.NewClientWithOptions(client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	if _, err := c.Get(ctx, "wf"); !isCode(err, codes.Unimplemented) {
		t.Fatalf("get: %v", err)
	}
	for _, err := range c.ReadStream(ctx, "wf", "k", 0) {
		if !isCode(err, codes.Unimplemented) {
			t.Fatalf("read stream: %v", err)
		}
	}
	worker.Logger = testLogger(t)
	if err := runResult(t, runUntilReturns(t, waymark.NewWorker(worker))); !isCode(err, codes.Unauthenticated) {
		t.Fatalf("worker: %v", err)
	}
}

func isCode(err error, code codes.Code) bool {
	var werr *waymark.Error
	return errors.As(err, &werr) && werr.Code == code
}

func TestEveryCallCarriesTheKeyAndNamespace(t *testing.T) {
	clearConnectionEnv(t)
	const key = "wmk_k1d_s3cr3t"
	refused := func(int32, grpc.BidiStreamingServer[pb.WorkerMessage, pb.ServerMessage]) error {
		return refuse(codes.Unauthenticated, "UNAUTHENTICATED", "unknown API key")
	}

	t.Run("options", func(t *testing.T) {
		s := startGoServer(t, nil, refused)
		callEverything(t, s,
			waymark.ClientOptions{Server: s.addr, APIKey: key, Namespace: "default"},
			waymark.WorkerOptions{Server: "http://" + s.addr, APIKey: key, Namespace: "default"})
		for _, m := range []string{getMethod, readStreamMethod, connectMethod} {
			wantMetadata(t, s, m, key, "default")
		}
	})

	t.Run("environment", func(t *testing.T) {
		s := startGoServer(t, nil, refused)
		t.Setenv("WAYMARK_SERVER", s.addr)
		t.Setenv("WAYMARK_API_KEY", key+"\n") // as read from a file
		t.Setenv("WAYMARK_NAMESPACE", "default")
		callEverything(t, s, waymark.ClientOptions{}, waymark.WorkerOptions{})
		for _, m := range []string{getMethod, readStreamMethod, connectMethod} {
			wantMetadata(t, s, m, key, "default")
		}
	})

	t.Run("none", func(t *testing.T) {
		s := startGoServer(t, nil, refused)
		callEverything(t, s, waymark.ClientOptions{Server: s.addr}, waymark.WorkerOptions{Server: s.addr})
		for _, m := range []string{getMethod, readStreamMethod, connectMethod} {
			wantMetadata(t, s, m, "", "")
		}
	})
}

// A worker whose stream is refused for its key or its role stops, whether at once or after
// the server welcomed it, with the refusal as an *Error; the key is not in it.
func TestWorkerStopsWhenItsStreamIsRefused(t *testing.T) {
	clearConnectionEnv(t)
	const key = "wmk_k2d_an0ther"
	for _, c := range []struct {
		name    string
		code    codes.Code
		reason  string
		welcome bool
	}{
		{"unauthenticated at connect", codes.Unauthenticated, "UNAUTHENTICATED", false},
		{"permission denied at connect", codes.PermissionDenied, "PERMISSION_DENIED", false},
		{"unauthenticated once connected", codes.Unauthenticated, "UNAUTHENTICATED", true},
		{"permission denied once connected", codes.PermissionDenied, "PERMISSION_DENIED", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startGoServer(t, nil, func(_ int32, stream grpc.BidiStreamingServer[pb.WorkerMessage, pb.ServerMessage]) error {
				if c.welcome {
					if _, err := stream.Recv(); err != nil {
						return err
					}
					if err := stream.Send(&pb.ServerMessage{Kind: &pb.ServerMessage_Welcome{Welcome: &pb.Welcome{SessionId: "s", HeartbeatIntervalMs: 3_600_000}}}); err != nil {
						return err
					}
					// The credit the worker grants once welcomed.
					if _, err := stream.Recv(); err != nil {
						return err
					}
				}
				return refuse(c.code, c.reason, "API key revoked")
			})
			w := waymark.NewWorker(waymark.WorkerOptions{Server: s.addr, APIKey: key, Logger: testLogger(t)})
			welcomes := waymark.CountWelcomes(w)
			err := runResult(t, runUntilReturns(t, w))
			wantRefusal(t, err, c.reason, key)
			if n := s.connects.Load(); n != 1 {
				t.Errorf("the worker connected %d times, want once", n)
			}
			if got, want := welcomes() == 1, c.welcome; got != want {
				t.Errorf("welcomed %d times", welcomes())
			}
		})
	}
}

// Other ends of the stream — the server unavailable, the stream closed — are not refusals:
// the worker reconnects, as before.
func TestWorkerReconnectsAfterOtherStreamErrors(t *testing.T) {
	clearConnectionEnv(t)
	third := make(chan struct{})
	s := startGoServer(t, nil, func(n int32, stream grpc.BidiStreamingServer[pb.WorkerMessage, pb.ServerMessage]) error {
		switch n {
		case 1:
			return status.Error(codes.Unavailable, "draining")
		case 2:
			if _, err := stream.Recv(); err != nil {
				return err
			}
			if err := stream.Send(&pb.ServerMessage{Kind: &pb.ServerMessage_Welcome{Welcome: &pb.Welcome{SessionId: "s", HeartbeatIntervalMs: 3_600_000}}}); err != nil {
				return err
			}
			return status.Error(codes.Internal, "went wrong")
		case 3:
			close(third)
		}
		<-stream.Context().Done()
		return nil
	})
	w := waymark.NewWorker(waymark.WorkerOptions{Server: s.addr, APIKey: "wmk_x_y", Logger: testLogger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-third:
	case err := <-done:
		cancel()
		t.Fatalf("Run returned %v before connecting a third time", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the worker did not connect a third time")
	}
	cancel()
	if err := runResult(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// The TLS options against a TLS server of this process, on certificates from
// waymark-test-certs. A call that reaches the server is UNIMPLEMENTED there; one refused in the
// handshake is UNAVAILABLE.
func TestTLSOptionsAgainstAGoServer(t *testing.T) {
	clearConnectionEnv(t)
	certs := testCerts(t)
	file := func(name string) string { return certs + "/" + name }
	read := func(name string) []byte {
		b, err := os.ReadFile(file(name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	serverCert, err := tls.LoadX509KeyPair(file("server.pem"), file("server.key"))
	if err != nil {
		t.Fatal(err)
	}
	plain := startGoServer(t, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert}}), nil)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(read("ca.pem"))
	mutual := startGoServer(t, credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
	}), nil)

	for _, c := range []struct {
		name   string
		server *goServer
		opts   waymark.ClientOptions
		want   codes.Code
	}{
		{"CA file", plain, waymark.ClientOptions{TLS: waymark.TLSOptions{CAFile: file("ca.pem")}}, codes.Unimplemented},
		{"CA PEM, https", plain, waymark.ClientOptions{Server: "https://", TLS: waymark.TLSOptions{CA: read("ca.pem")}}, codes.Unimplemented},
		{"another CA", plain, waymark.ClientOptions{TLS: waymark.TLSOptions{CAFile: file("other-ca.pem")}}, codes.Unavailable},
		{"system roots", plain, waymark.ClientOptions{Server: "https://"}, codes.Unavailable},
		{"mutual, no client certificate", mutual, waymark.ClientOptions{TLS: waymark.TLSOptions{CAFile: file("ca.pem")}}, codes.Unavailable},
		{"mutual, certificate files", mutual, waymark.ClientOptions{TLS: waymark.TLSOptions{
			CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client.key"),
		}}, codes.Unimplemented},
		{"mutual, certificate PEM", mutual, waymark.ClientOptions{TLS: waymark.TLSOptions{
			CA: read("ca.pem"), Cert: read("client.pem"), Key: read("client.key"),
		}}, codes.Unimplemented},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.Server += c.server.addr
			client, err := waymark.NewClientWithOptions(c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			// Delay is not retried on UNAVAILABLE: its first answer is the answer.
			if _, err := client.Delay(testCtx(t), "wf", 0); !isCode(err, c.want) {
				t.Fatalf("got %v, want code %s", err, c.want)
			}
		})
	}
}
