package waymark

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// sdkName is reported in Hello, for operators.
const sdkName = "go/0.1.0"

// WorkerOptions configure a Worker; the zero value serves queue "default" on DefaultServer.
type WorkerOptions struct {
	// Server is the address: "host:port", "http://host:port" (plaintext) or "https://host:port"
	// (TLS). Empty: WAYMARK_SERVER, else 127.0.0.1:7450. Without a scheme, the connection is
	// TLS when any TLS option is set; with http://, setting one is an error (from Run).
	Server string
	// TLS: the CA to trust, and the certificate to present for mutual TLS. Fields left empty
	// fall back to WAYMARK_TLS_CA, WAYMARK_TLS_CERT and WAYMARK_TLS_KEY.
	TLS TLSOptions
	// APIKey is sent as `authorization: Bearer <key>` on the worker's stream, for a server
	// started with --auth: a key of role worker (or admin). Empty: WAYMARK_API_KEY. It is
	// never put in an error or a log.
	APIKey string
	// Namespace is sent as `waymark-namespace` metadata. Empty: WAYMARK_NAMESPACE, else none
	// (the server's default namespace).
	Namespace string
	// Insecure allows sending the API key over plaintext (http://, or no scheme and no TLS
	// option) to a host that is not loopback (localhost, 127.x.x.x, ::1), where it would
	// cross the network unencrypted; without it (or WAYMARK_INSECURE=1) that is an error (from Run).
	// With transport credentials of your own in DialOptions, give an https:// address.
	Insecure bool
	// DialOptions are added after the SDK's own (interceptors, or transport credentials of
	// your own, which replace the ones the options above make).
	DialOptions []grpc.DialOption
	// WorkerID is the stable id of this process, kept across reconnects; generated when empty.
	WorkerID string
	// AppName and AppVersion: workflows are pinned to the version of the worker that first
	// runs them and only recovered onto workers of the same version.
	AppName    string
	AppVersion string
	// Queues to take workflows from; "default" when empty. The server creates those missing.
	Queues []string
	// MaxConcurrentWorkflows is how many workflows run here at once (credits); default 100.
	MaxConcurrentWorkflows uint32
	// MaxConcurrentSteps is how many remote step attempts run here at once; default 16.
	MaxConcurrentSteps uint32
	// ParkAfter: a workflow that will wait (sleep, recv, events, children, remote steps)
	// longer than this is parked — released from this worker until its wait resolves.
	// Zero means 60 seconds; negative keeps every waiting workflow in memory.
	ParkAfter time.Duration
	// RetryUnavailable is how long a request the server answers UNAVAILABLE (its database
	// restarting, say) is sent again, with backoff, before the run is dropped: it stops without
	// completing, and the server dispatches the workflow again. Zero means 60 seconds;
	// negative drops the run at the first such answer.
	RetryUnavailable time.Duration
	// Logger receives the worker's logs; slog.Default() when nil.
	Logger *slog.Logger
	// TracerProvider opens the worker's spans (see "Tracing" in the README); the global one
	// (otel.GetTracerProvider) when nil, which records nothing until a program installs an
	// OpenTelemetry SDK.
	TracerProvider trace.TracerProvider
}

// Worker runs the workflows and remote steps registered on it for the server, over one
// stream that it reconnects, with backoff, whenever it breaks.
type Worker struct {
	opts   WorkerOptions
	logger *slog.Logger
	// The connection the options describe, resolved by NewWorker; or why they cannot work,
	// which Run returns.
	endpoint    *endpoint
	endpointErr error

	mu        sync.RWMutex
	workflows map[string]workflowFunc
	steps     map[string]stepFunc

	// Opens the spans of its runs and of the remote steps it serves.
	tracer trace.Tracer

	hooks testHooks
}

// Erased forms of the registered functions: JSON payloads in and out.
type (
	workflowFunc func(ctx Context, input *pb.Payload) (*pb.Payload, error)
	stepFunc     func(ctx context.Context, input *pb.Payload) (*pb.Payload, error)
)

// NewWorker makes a worker; register workflows and steps on it, then Run it.
func NewWorker(opts WorkerOptions) *Worker {
	if opts.WorkerID == "" {
		opts.WorkerID = "go-" + crand.Text()
	}
	if opts.MaxConcurrentWorkflows == 0 {
		opts.MaxConcurrentWorkflows = 100
	}
	if opts.MaxConcurrentSteps == 0 {
		opts.MaxConcurrentSteps = 16
	}
	if opts.ParkAfter == 0 {
		opts.ParkAfter = time.Minute
	}
	if opts.RetryUnavailable == 0 {
		opts.RetryUnavailable = defaultUnavailableRetry
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	e, err := connOptions{server: opts.Server, tls: opts.TLS, apiKey: opts.APIKey, namespace: opts.Namespace, insecure: opts.Insecure, dial: opts.DialOptions}.resolve()
	return &Worker{
		opts:        opts,
		logger:      logger.With("worker_id", opts.WorkerID),
		endpoint:    e,
		endpointErr: err,
		workflows:   map[string]workflowFunc{},
		steps:       map[string]stepFunc{},
		tracer:      tracerOf(opts.TracerProvider),
	}
}

// ID is the worker's id.
func (w *Worker) ID() string { return w.opts.WorkerID }

// RegisterWorkflow registers fn as workflow name. Input and output travel as JSON. fn must be
// deterministic in the steps and waits it calls: a replay calls them again, in the same order,
// and gets their recorded results. Register before Run.
func RegisterWorkflow[I, O any](w *Worker, name string, fn func(ctx Context, input I) (O, error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.workflows[name] = func(ctx Context, input *pb.Payload) (*pb.Payload, error) {
		in, err := decodePayload[I](input)
		if err != nil {
			return nil, &Failure{Kind: "Serialization", Message: fmt.Sprintf("workflow input does not match the function's type: %v", err)}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return toPayload(out)
	}
}

// RegisterStep registers fn as remote step name: any workflow, in any language, can call it
// with CallStep and the server dispatches the call here (or to another worker that registered
// it). An error fails the attempt; the caller's retry policy decides what next. ctx ends at the
// attempt's deadline. Register before Run.
func RegisterStep[I, O any](w *Worker, name string, fn func(ctx context.Context, input I) (O, error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.steps[name] = func(ctx context.Context, input *pb.Payload) (*pb.Payload, error) {
		in, err := decodePayload[I](input)
		if err != nil {
			return nil, fmt.Errorf("step input does not match the function's type: %w", err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return toPayload(out)
	}
}

func (w *Worker) workflow(name string) workflowFunc {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.workflows[name]
}

func (w *Worker) step(name string) stepFunc {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.steps[name]
}

// Run serves until ctx is done, then returns nil. It reconnects with backoff whenever the
// stream breaks; what was running when it broke is dropped here and the server hands it out
// again. It returns an error only for what retrying cannot fix: options that cannot work (an
// unreadable PEM file, TLS options with an http:// address), or the server refusing the
// worker's stream — its registration (INVALID_ARGUMENT), its API key (UNAUTHENTICATED: none,
// unknown, expired, or revoked while the worker runs) or the key's role (PERMISSION_DENIED),
// each an *Error whose Reason says which.
//
// Run returns only once every workflow run and remote step attempt it started has returned:
// when ctx ends, their contexts end too, and the worker sends nothing more for them. A
// workflow or step function that does not heed its context holds Run up until it returns.
func (w *Worker) Run(ctx context.Context) error {
	if w.endpointErr != nil {
		return w.endpointErr
	}
	cc, err := w.endpoint.dial()
	if err != nil {
		return err
	}
	defer cc.Close()
	// Before the connection closes: nothing started here uses it after.
	var g goroutines
	defer g.wait(w.logger)
	failures := 0
	for {
		welcomed, err := w.session(ctx, cc, &g)
		if ctx.Err() != nil {
			return nil
		}
		var rpc *Error
		if errors.As(err, &rpc) && refusal(rpc.Code) {
			w.logger.Error("the server refused this worker's stream; not reconnecting", "code", rpc.Code.String(), "reason", rpc.Reason, "error", err)
			return err
		}
		if welcomed {
			failures = 0
		}
		failures++
		w.logger.Warn("worker stream ended; reconnecting", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff(failures)):
		}
	}
}

// refusal: the server refused the worker's stream for something reconnecting cannot change.
func refusal(c codes.Code) bool {
	return c == codes.InvalidArgument || c == codes.Unauthenticated || c == codes.PermissionDenied
}

func (w *Worker) hasSteps() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.steps) > 0
}
