package waymark

import (
	"context"
	"encoding/json"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Client starts workflows and watches them (waymark.v1.WorkflowService), and manages queues
// and schedules. It is safe for concurrent use; make one and share it.
type Client struct {
	conn      *grpc.ClientConn
	workflows pb.WorkflowServiceClient
	queues    pb.QueueServiceClient
	schedules pb.ScheduleServiceClient
}

// ClientOptions configure a Client; the zero value connects to DefaultServer in plaintext,
// without an API key, unless the environment says otherwise (see the fields).
type ClientOptions struct {
	// Server is the address: "host:port", "http://host:port" (plaintext) or "https://host:port"
	// (TLS). Empty: WAYMARK_SERVER, else 127.0.0.1:7450. Without a scheme, the connection is
	// TLS when any TLS option is set; with http://, setting one is an error.
	Server string
	// TLS: the CA to trust, and the certificate to present for mutual TLS. Fields left empty
	// fall back to WAYMARK_TLS_CA, WAYMARK_TLS_CERT and WAYMARK_TLS_KEY.
	TLS TLSOptions
	// APIKey is sent as `authorization: Bearer <key>` on every call, for a server started with
	// --auth. Empty: WAYMARK_API_KEY. It is never put in an error or a log.
	APIKey string
	// Namespace is sent as `waymark-namespace` metadata on every call. Empty:
	// WAYMARK_NAMESPACE, else none (the server's default namespace).
	Namespace string
	// Insecure allows sending the API key over plaintext (http://, or no scheme and no TLS
	// option) to a host that is not loopback (localhost, 127.x.x.x, ::1), where it would
	// cross the network unencrypted; without it (or WAYMARK_INSECURE=1) that is an error.
	// With transport credentials of your own in DialOptions, give an https:// address.
	Insecure bool
	// DialOptions are added after the SDK's own (interceptors, or transport credentials of
	// your own, which replace the ones the options above make).
	DialOptions []grpc.DialOption
}

// NewClient makes a client of the server at addr ("host:port", an http:// or https:// URL, or
// "" for DefaultServer), with the TLS, API key and namespace of the environment (see
// ClientOptions). It connects lazily, on the first call.
func NewClient(addr string, opts ...grpc.DialOption) (*Client, error) {
	return NewClientWithOptions(ClientOptions{Server: addr, DialOptions: opts})
}

// NewClientWithOptions makes a client with these options. It connects lazily, on the first
// call; an option that cannot work (an unreadable PEM file, TLS options with an http://
// address, a certificate without its key, an API key over plaintext to a host that is not
// loopback without Insecure) is an error here.
func NewClientWithOptions(opts ClientOptions) (*Client, error) {
	e, err := connOptions{server: opts.Server, tls: opts.TLS, apiKey: opts.APIKey, namespace: opts.Namespace, insecure: opts.Insecure, dial: opts.DialOptions}.resolve()
	if err != nil {
		return nil, err
	}
	conn, err := e.dial()
	if err != nil {
		return nil, err
	}
	return &Client{
		conn:      conn,
		workflows: pb.NewWorkflowServiceClient(conn),
		queues:    pb.NewQueueServiceClient(conn),
		schedules: pb.NewScheduleServiceClient(conn),
	}, nil
}

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// StartOptions are a start's options; the zero value starts on "default" with a generated id.
type StartOptions struct {
	// ID makes the start idempotent: starting the same id again returns the existing workflow.
	ID string
	// Queue to start on; "default" when empty.
	Queue string
	// AppVersion pins the workflow to workers of this version (else: the first that runs it).
	AppVersion string
	// Timeout cancels the workflow (and its children) if it has not finished this long after
	// the start. Zero: no deadline.
	Timeout time.Duration
	// Priority: lower is dispatched first within the queue; FIFO within a priority.
	Priority int32
	// PartitionKey is the workflow's partition of the queue.
	PartitionKey string
	// DedupID is unique among the queue's unfinished workflows: a second start with it fails
	// with reason DEDUP_ID_TAKEN (the holder in Metadata["holder_workflow_id"]), unless
	// ReturnExisting is set.
	DedupID        string
	ReturnExisting bool
	// Delay: do not dispatch before this long from now.
	Delay time.Duration
	// Debounce collapses repeated starts with one key onto one delayed workflow (needs Delay).
	Debounce *Debounce
	// AllowUnregistered enqueues the workflow even if no worker has registered its name yet
	// (a rolling deploy, or another team's workers): it waits ENQUEUED until one that does
	// connects, and Started.NameRegistered is false. Without it such a start fails with
	// reason WORKFLOW_NAME_UNKNOWN.
	AllowUnregistered bool
	// Tags label the workflow, to find it by (ListOptions.Tags, WorkflowFilter.Tags): at most
	// 16, keys 1-64 characters of letters, digits and `_ - . /`, values at most 256. Its
	// children inherit them. Returned in Workflow.Tags and copied by a fork.
	Tags map[string]string
}

// Debounce collapses repeated starts of one workflow name with Key: each start replaces the
// input and moves the start to Delay from now, but never past MaxDelay after the first start
// (default ten times Delay).
type Debounce struct {
	Key      string
	MaxDelay time.Duration
}

// Started is a start's result: the workflow, and whether this call created it.
type Started struct {
	*Workflow
	// False when the id (or dedup id, with ReturnExisting) named an existing workflow.
	Created bool
	// False when no worker has registered the workflow's name yet (a start with
	// AllowUnregistered): it waits until one does — or for ever, if the name is misspelt.
	NameRegistered bool
}

func durationOrNil(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// Start starts workflow name with input (any JSON-encodable value). opts may be nil.
func (c *Client) Start(ctx context.Context, name string, input any, opts *StartOptions) (*Started, error) {
	req, err := startRequest(name, input, opts)
	if err != nil {
		return nil, err
	}
	r, err := retried(ctx, c.workflows.StartWorkflow, req)
	if err != nil {
		return nil, err
	}
	return &Started{Workflow: workflowFromWire(r.GetWorkflow()), Created: r.GetCreated(), NameRegistered: r.GetNameRegistered()}, nil
}

// startRequest is the request that starts workflow name with input and opts (nil: none), the
// same for Start and StartAndSend.
func startRequest(name string, input any, opts *StartOptions) (*pb.StartWorkflowRequest, error) {
	if opts == nil {
		opts = &StartOptions{}
	}
	payload, err := toPayload(input)
	if err != nil {
		return nil, err
	}
	req := &pb.StartWorkflowRequest{
		WorkflowName:      name,
		WorkflowId:        opts.ID,
		Input:             payload,
		QueueName:         opts.Queue,
		AppVersion:        opts.AppVersion,
		Timeout:           durationOrNil(opts.Timeout),
		Priority:          opts.Priority,
		PartitionKey:      opts.PartitionKey,
		DedupId:           opts.DedupID,
		Delay:             durationOrNil(opts.Delay),
		AllowUnregistered: opts.AllowUnregistered,
		Tags:              opts.Tags,
	}
	if opts.ReturnExisting {
		req.OnDuplicate = pb.DuplicatePolicy_DUPLICATE_POLICY_RETURN_EXISTING
	}
	if d := opts.Debounce; d != nil {
		req.Debounce = &pb.Debounce{Key: d.Key, MaxDelay: durationOrNil(d.MaxDelay)}
	}
	if req.WorkflowId == "" {
		// Named here rather than by the server, so that a start retried after UNAVAILABLE
		// finds the workflow the first try may have made instead of making another.
		req.WorkflowId = newWorkflowID()
	}
	return req, nil
}

// Get reads one workflow.
func (c *Client) Get(ctx context.Context, workflowID string) (*Workflow, error) {
	r, err := retried(ctx, c.workflows.GetWorkflow, &pb.GetWorkflowRequest{WorkflowId: workflowID})
	if err != nil {
		return nil, err
	}
	return workflowFromWire(r.GetWorkflow()), nil
}

// Await waits until the workflow is terminal and returns it. Bound the wait with ctx: past
// its deadline the error matches context.DeadlineExceeded.
func (c *Client) Await(ctx context.Context, workflowID string) (*Workflow, error) {
	r, err := retried(ctx, c.workflows.AwaitWorkflow, &pb.AwaitWorkflowRequest{WorkflowId: workflowID})
	if err != nil {
		return nil, err
	}
	return workflowFromWire(r.GetWorkflow()), nil
}

// Steps lists the workflow's recorded steps, in order, reading every page.
func (c *Client) Steps(ctx context.Context, workflowID string) ([]StepRecord, error) {
	return readAll(ctx, c.workflows.ListSteps,
		func(token string) *pb.ListStepsRequest {
			return &pb.ListStepsRequest{WorkflowId: workflowID, PageToken: token}
		},
		(*pb.ListStepsResponse).GetSteps, stepFromWire)
}

// History is the workflow's recorded history — its id, name and input, and every recorded
// step with its output or failure — in the form a Replayer replays and `waymark workflow
// export` prints. Saved as JSON, it lets a test suite replay changed workflow code against
// workflows already running before the change is deployed.
func (c *Client) History(ctx context.Context, workflowID string) (*RecordedHistory, error) {
	wf, err := c.Get(ctx, workflowID)
	if err != nil {
		return nil, err
	}
	steps, err := c.Steps(ctx, workflowID)
	if err != nil {
		return nil, err
	}
	h := &RecordedHistory{WorkflowID: wf.ID, WorkflowName: wf.Name, Input: wf.Input, Steps: []RecordedStep{}}
	for _, s := range steps {
		rec := RecordedStep{StepID: s.ID, Name: s.Name, Failure: s.Failure}
		if s.Failure == nil {
			// A step without an output recorded null (a wait that timed out): kept as null,
			// not left out, as the other SDKs write it.
			rec.Output = s.Output
			if len(rec.Output) == 0 {
				rec.Output = json.RawMessage("null")
			}
		}
		h.Steps = append(h.Steps, rec)
	}
	return h, nil
}

// Cancel cancels a workflow that has not finished; it stops at its next step or wait. A
// finished workflow is returned as it is.
func (c *Client) Cancel(ctx context.Context, workflowID string) (*Workflow, error) {
	return c.cancel(ctx, workflowID, false)
}

// CancelTree cancels a workflow and its child workflows, and theirs, level by level.
func (c *Client) CancelTree(ctx context.Context, workflowID string) (*Workflow, error) {
	return c.cancel(ctx, workflowID, true)
}

func (c *Client) cancel(ctx context.Context, workflowID string, cascade bool) (*Workflow, error) {
	r, err := retried(ctx, c.workflows.CancelWorkflow, &pb.CancelWorkflowRequest{WorkflowId: workflowID, Cascade: cascade})
	if err != nil {
		return nil, err
	}
	return workflowFromWire(r.GetWorkflow()), nil
}

// Resume puts a cancelled, dead-lettered or failed (ERROR) workflow back in its queue; it
// replays from its checkpoints. An ERROR workflow's failed last step's record goes, so that
// step runs again: with its code fixed (a worker of the same app version replacing the old
// one), the workflow goes on from where it failed.
func (c *Client) Resume(ctx context.Context, workflowID string) (*Workflow, error) {
	r, err := retried(ctx, c.workflows.ResumeWorkflow, &pb.ResumeWorkflowRequest{WorkflowId: workflowID})
	if err != nil {
		return nil, err
	}
	return workflowFromWire(r.GetWorkflow()), nil
}

// Delete deletes a finished workflow and everything recorded for it (its steps, the messages
// sent to it, its events, its stream); with cascade, its child workflows and theirs too. It
// returns the ids deleted, workflowID first. A workflow that has not finished is refused with
// reason WORKFLOW_NOT_FINISHED (cancel it first), and so is a cascade over a descendant that
// has not; a child whose parent has not finished, with PARENT_NOT_FINISHED; a cascade over
// more than 10,000 workflows, with TOO_MANY_TO_DELETE; a workflow that does not exist, with
// WORKFLOW_NOT_FOUND. It is sent once, not again on UNAVAILABLE: repeated after a lost reply
// it would find the workflow gone.
func (c *Client) Delete(ctx context.Context, workflowID string, cascade bool) ([]string, error) {
	r, err := c.workflows.DeleteWorkflow(ctx, &pb.DeleteWorkflowRequest{WorkflowId: workflowID, Cascade: cascade})
	if err != nil {
		return nil, rpcError(err)
	}
	return r.GetDeletedWorkflowIds(), nil
}

// ForkOptions are a fork's options; the zero value copies every recorded step of the source
// and runs the fork on the source's queue and app version, under a generated id.
type ForkOptions struct {
	// FromStep: copy the source's recorded steps before this position; the fork replays them
	// and runs on from here. Nil: all of them (the fork goes on from where the source
	// stopped). FromStep(n) makes one.
	FromStep *uint32
	// ID is the fork's id; generated when empty.
	ID string
	// AppVersion runs the fork on workers of this application version (the fixed code); the
	// source's when empty.
	AppVersion string
	// Queue it starts on; the source's when empty.
	Queue string
}

// FromStep is a ForkOptions.FromStep of position n.
func FromStep(n uint32) *uint32 { return &n }

// Fork starts a new workflow from workflowID's history (finished or not): the same name and
// input, with the source's recorded steps before opts.FromStep copied (and the events it set
// and stream values it wrote by then), so the fork replays up to there and runs on — on
// opts.AppVersion's workers if given, the way to move a failed workflow onto fixed code. It
// returns the fork, ENQUEUED, its lineage in ForkedFromID and ForkedFromStep. The same fork
// again returns the first one; an id anything else holds fails with reason
// WORKFLOW_ID_CONFLICT, and a source that does not exist with WORKFLOW_NOT_FOUND. The id is
// chosen here when not given, so a fork resent after UNAVAILABLE is the same fork.
func (c *Client) Fork(ctx context.Context, workflowID string, opts ForkOptions) (*Workflow, error) {
	req := &pb.ForkWorkflowRequest{
		WorkflowId:    workflowID,
		FromStep:      opts.FromStep,
		NewWorkflowId: opts.ID,
		AppVersion:    opts.AppVersion,
		QueueName:     opts.Queue,
	}
	if req.NewWorkflowId == "" {
		req.NewWorkflowId = newWorkflowID()
	}
	r, err := retried(ctx, c.workflows.ForkWorkflow, req)
	if err != nil {
		return nil, err
	}
	return workflowFromWire(r.GetWorkflow()), nil
}

// Delay moves the start of a workflow still waiting for its delayed start to delay from now
// (zero: at once). Anything else fails with reason WORKFLOW_NOT_DELAYED.
func (c *Client) Delay(ctx context.Context, workflowID string, delay time.Duration) (*Workflow, error) {
	r, err := c.workflows.DelayWorkflow(ctx, &pb.DelayWorkflowRequest{WorkflowId: workflowID, Delay: durationpb.New(delay)})
	if err != nil {
		return nil, rpcError(err)
	}
	return workflowFromWire(r.GetWorkflow()), nil
}

// ListOptions filter a list; the zero value lists everything, newest first.
type ListOptions struct {
	Statuses      []Status
	Name          string
	Queue         string
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// Tags: only workflows carrying every one of these (key and value), at most 16.
	Tags map[string]string
	// WorkerID: only workflows running on (PENDING) or last run by this worker.
	WorkerID string
	// AppVersion: only workflows pinned to this application version.
	AppVersion string
	// ParentID: only the children of this workflow.
	ParentID string
	// PageSize: 1-1000, 100 when zero.
	PageSize int32
	// PageToken continues from a previous page's NextPageToken.
	PageToken string
}

// List returns one page of workflows and the token of the next page ("" on the last). A page
// may hold fewer than PageSize workflows (their payloads filled the response) and not be the
// last: only an empty token ends the list. All reads every page.
func (c *Client) List(ctx context.Context, opts *ListOptions) ([]*Workflow, string, error) {
	if opts == nil {
		opts = &ListOptions{}
	}
	req := &pb.ListWorkflowsRequest{
		WorkflowName:     opts.Name,
		QueueName:        opts.Queue,
		PageSize:         opts.PageSize,
		PageToken:        opts.PageToken,
		Tags:             opts.Tags,
		WorkerId:         opts.WorkerID,
		AppVersion:       opts.AppVersion,
		ParentWorkflowId: opts.ParentID,
	}
	for _, s := range opts.Statuses {
		req.Statuses = append(req.Statuses, statusWire[s])
	}
	if !opts.CreatedAfter.IsZero() {
		req.CreatedAfter = timestamppb.New(opts.CreatedAfter)
	}
	if !opts.CreatedBefore.IsZero() {
		req.CreatedBefore = timestamppb.New(opts.CreatedBefore)
	}
	r, err := retried(ctx, c.workflows.ListWorkflows, req)
	if err != nil {
		return nil, "", err
	}
	out := make([]*Workflow, 0, len(r.GetWorkflows()))
	for _, w := range r.GetWorkflows() {
		out = append(out, workflowFromWire(w))
	}
	return out, r.GetNextPageToken(), nil
}
