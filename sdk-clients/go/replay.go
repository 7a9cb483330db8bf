package waymark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"runtime/debug"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// RecordedHistory is a workflow's recorded history: what it was started with and the steps
// it recorded. It is the JSON `waymark workflow export` prints and Client.History returns:
// {"workflow_id", "workflow_name", "input", "steps": [...]}.
type RecordedHistory struct {
	// WorkflowID is what ctx.WorkflowID() returns in the replay; "replay" when empty.
	WorkflowID   string `json:"workflow_id"`
	WorkflowName string `json:"workflow_name"`
	// Input is the workflow's input as JSON; empty reads as null.
	Input json.RawMessage `json:"input"`
	Steps []RecordedStep  `json:"steps"`
}

// RecordedStep is one recorded step: its position, its name, and its output or its failure.
type RecordedStep struct {
	StepID uint32 `json:"step_id"`
	Name   string `json:"name"`
	// Output is the step's output as JSON when it did not fail; empty reads as null (what a
	// wait that timed out records).
	Output  json.RawMessage `json:"output,omitempty"`
	Failure *Failure        `json:"failure,omitempty"`
}

// Replayed is how a replay ended: a Returned, a Failed, a Suspended or a ContinuedAsNew.
type Replayed interface {
	replayed()
	fmt.Stringer
}

// Returned: the code returned Value (as JSON, as a live run would record it), every call it
// made answered by the history.
type Returned struct{ Value json.RawMessage }

// Failed: the code failed, with the Kind and Message a live run would record — its own error
// (a *Failure's kind, or an error's Kind() method; else "Error"), a recorded failure it did not
// handle ("StepFailed"), or "NonDeterminism" when it called another step than the history
// records at that position. Err is the error itself.
type Failed struct {
	Kind, Message string
	Err           error
}

// Suspended: the code made a call at StepID, which the history does not record — a step to
// run, a request to the server, the time or a UUID to draw, a patch's marker to record (a
// Patched with nothing recorded where it looks), a sleep whose wake time is still ahead. A
// live run would go on from there; a workflow still running replays to this.
type Suspended struct{ StepID uint32 }

// ContinuedAsNew: the code returned ContinueAsNew with Input (as JSON): a live run would end
// here and the workflow go on under its id with Input and a fresh history.
type ContinuedAsNew struct{ Input json.RawMessage }

func (Returned) replayed()       {}
func (Failed) replayed()         {}
func (Suspended) replayed()      {}
func (ContinuedAsNew) replayed() {}

func (r Returned) String() string       { return fmt.Sprintf("returned %s", r.Value) }
func (f Failed) String() string         { return fmt.Sprintf("failed: %s: %s", f.Kind, f.Message) }
func (s Suspended) String() string      { return fmt.Sprintf("suspended at step %d", s.StepID) }
func (c ContinuedAsNew) String() string { return fmt.Sprintf("continued as new with %s", c.Input) }

// ErrHistoryEnded is what a workflow's call returns in a replay when its position is not
// recorded (see Suspended). Like ErrCancelled it ends the run, not fails it: return it as it
// comes. A workflow that swallows it still ends there: every later call that would go live
// returns it again, the run's context is done with it as the cause, and the replay is
// Suspended whatever the function returns.
var ErrHistoryEnded = errors.New("waymark: the replayed history ends here")

// ErrUnknownWorkflow: a Replayer was given the history of a workflow no one registered.
var ErrUnknownWorkflow = errors.New("waymark: no workflow of that name is registered")

// Replayer replays recorded histories offline, against a Worker's workflow code: no
// server, no step function called, nothing sent, no waiting. Every call the code makes is
// answered from the history; the first call it does not record ends the replay where a live
// run would go on. Use it in a test suite before deploying changed workflow code ("replay
// before deploy"): replay the histories of workflows already running (Client.History, or
// `waymark workflow export ID`) and check that none now fails with kind NonDeterminism. The
// project's golden histories (contract/histories/) are in the same format, and every SDK
// replays them to the same outcomes.
type Replayer struct {
	w         *Worker
	workflows map[string]workflowFunc
	// Called with every message a replay tried to send (the package's tests count them);
	// none ever should be.
	sent func(*pb.WorkerMessage)
}

// NewReplayer is a replayer of the workflows registered on w so far. w is not run.
func NewReplayer(w *Worker) *Replayer {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return &Replayer{w: w, workflows: maps.Clone(w.workflows)}
}

// Replay replays h with the workflow it names and says how the code fared. The error is for
// what keeps it from replaying at all: no workflow of that name is registered
// (ErrUnknownWorkflow), a recorded value that is not JSON, or ctx ending before the code did.
func (p *Replayer) Replay(ctx context.Context, h *RecordedHistory) (Replayed, error) {
	fn := p.workflows[h.WorkflowName]
	if fn == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorkflow, h.WorkflowName)
	}
	d, err := dispatchOf(h)
	if err != nil {
		return nil, err
	}
	r := p.offlineRun(ctx, d)
	defer r.cancel(nil)
	out, err := callOffline(r, fn, d.GetInput())
	// As a live run is: an interruption it swallowed still ends it (see execute).
	if stop := r.stopped(); stop != nil {
		err = stop
	}
	if ended, ok := errors.AsType[*historyEnded](err); ok {
		return Suspended{StepID: ended.step}, nil
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	lim := r.conn.limits
	if next, ok := continuedAsNew(err); ok {
		// As a live run: an input the server would not take fails the workflow.
		msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_CompleteWorkflow{CompleteWorkflow: &pb.CompleteWorkflow{
			WorkflowId: r.id, Epoch: r.epoch, Outcome: &pb.CompleteWorkflow_ContinueAsNew{ContinueAsNew: &pb.ContinueAsNew{Input: next}},
		}}}
		if big := lim.admit("the next run's input", next, msg); big != nil {
			err = &Failure{Kind: reasonPayloadTooLarge, Message: big.Message}
		} else {
			input, err := payloadJSON(next)
			if err != nil {
				return nil, err
			}
			return ContinuedAsNew{Input: input}, nil
		}
	}
	if err == nil {
		// A live run fails for an output the server would not take; so does its replay.
		msg := &pb.WorkerMessage{Kind: &pb.WorkerMessage_CompleteWorkflow{CompleteWorkflow: &pb.CompleteWorkflow{
			WorkflowId: r.id, Epoch: r.epoch, Outcome: &pb.CompleteWorkflow_Output{Output: out},
		}}}
		if big := lim.admit("the workflow's output", out, msg); big != nil {
			err = &Failure{Kind: reasonPayloadTooLarge, Message: big.Message}
		}
	}
	if err != nil {
		f := failureOf(err)
		clipped := lim.failure(f.Kind, f.Message)
		return Failed{Kind: clipped.GetKind(), Message: clipped.GetMessage(), Err: err}, nil
	}
	value, err := payloadJSON(out)
	if err != nil {
		return nil, err
	}
	return Returned{Value: value}, nil
}

// callOffline runs the registered function as session.call does: a panic fails the workflow
// with kind Panic.
func callOffline(r *run, fn workflowFunc, input *pb.Payload) (out *pb.Payload, err error) {
	defer func() {
		if p := recover(); p != nil {
			r.logger.Error("workflow panicked", "panic", p, "stack", string(debug.Stack()))
			out, err = nil, &Failure{Kind: "Panic", Message: fmt.Sprint(p)}
		}
	}()
	return fn(r, input)
}

// dispatchOf is the dispatch a live run of h would get: its input and steps as payloads, as
// they come off the wire.
func dispatchOf(h *RecordedHistory) (*pb.DispatchWorkflow, error) {
	id := h.WorkflowID
	if id == "" {
		id = "replay"
	}
	input, err := toPayload(h.Input)
	if err != nil {
		return nil, fmt.Errorf("waymark: the history's input: %w", err)
	}
	d := &pb.DispatchWorkflow{WorkflowId: id, WorkflowName: h.WorkflowName, Epoch: 1, Input: input}
	for _, s := range h.Steps {
		st := &pb.Step{StepId: s.StepID, Name: s.Name}
		if f := s.Failure; f != nil {
			st.Failure = &pb.Failure{Kind: f.Kind, Message: f.Message}
		} else if st.Output, err = toPayload(s.Output); err != nil {
			return nil, fmt.Errorf("waymark: the output of step %d (%s): %w", s.StepID, s.Name, err)
		}
		d.Steps = append(d.Steps, st)
	}
	return d, nil
}
