package waymark

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Status is where a workflow is in its life.
type Status string

const (
	StatusUnspecified Status = "UNSPECIFIED"
	StatusEnqueued    Status = "ENQUEUED"
	StatusDelayed     Status = "DELAYED"
	StatusPending     Status = "PENDING"
	StatusSuccess     Status = "SUCCESS"
	StatusError       Status = "ERROR"
	StatusCancelled   Status = "CANCELLED"
	// StatusDeadLettered: recovered more times than the server allows.
	StatusDeadLettered Status = "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
	// StatusContinuedAsNew: an ended run of a workflow that continued as new (`<id>/run-<n>`,
	// see ContinueAsNew); the workflow itself goes on under its id.
	StatusContinuedAsNew Status = "CONTINUED_AS_NEW"
)

var statusWire = map[Status]pb.WorkflowStatus{
	StatusUnspecified:    pb.WorkflowStatus_WORKFLOW_STATUS_UNSPECIFIED,
	StatusEnqueued:       pb.WorkflowStatus_WORKFLOW_STATUS_ENQUEUED,
	StatusDelayed:        pb.WorkflowStatus_WORKFLOW_STATUS_DELAYED,
	StatusPending:        pb.WorkflowStatus_WORKFLOW_STATUS_PENDING,
	StatusSuccess:        pb.WorkflowStatus_WORKFLOW_STATUS_SUCCESS,
	StatusError:          pb.WorkflowStatus_WORKFLOW_STATUS_ERROR,
	StatusCancelled:      pb.WorkflowStatus_WORKFLOW_STATUS_CANCELLED,
	StatusDeadLettered:   pb.WorkflowStatus_WORKFLOW_STATUS_MAX_RECOVERY_ATTEMPTS_EXCEEDED,
	StatusContinuedAsNew: pb.WorkflowStatus_WORKFLOW_STATUS_CONTINUED_AS_NEW,
}

func statusFromWire(s pb.WorkflowStatus) Status {
	for k, v := range statusWire {
		if v == s {
			return k
		}
	}
	return StatusUnspecified
}

// Terminal reports whether the workflow has finished for good.
func (s Status) Terminal() bool {
	return s == StatusSuccess || s == StatusError || s == StatusCancelled || s == StatusDeadLettered ||
		s == StatusContinuedAsNew
}

// Workflow is one execution of a workflow function, as the server reports it.
type Workflow struct {
	ID         string
	Name       string
	Status     Status
	Queue      string
	AppVersion string
	Input      json.RawMessage
	// Set when Status is SUCCESS.
	Output json.RawMessage
	// Set when Status is ERROR.
	Failure          *Failure
	CreatedAt        time.Time
	UpdatedAt        time.Time
	RecoveryAttempts uint32
	Epoch            uint64
	// The worker running it (PENDING only).
	WorkerID string
	// The workflow that started this one as its child; empty for top-level workflows.
	ParentID string
	// When it is cancelled if not finished; zero for none.
	Deadline     time.Time
	Priority     int32
	PartitionKey string
	DedupID      string
	// When it was first dispatched; zero before.
	StartedAt time.Time
	// While DELAYED: when it goes back to its queue.
	WakeAt time.Time
	// The trace it belongs to (W3C Trace Context): the span that started it, as the server
	// keeps it. Empty when it was started with none, or by a server that keeps none.
	Traceparent, Tracestate string
	// Lineage (see Client.Fork): the workflow this one was forked from, and the step position
	// it ran on from (the source's steps before it were copied). Empty and 0 when not a fork.
	ForkedFromID   string
	ForkedFromStep uint32
	// Tags: given at the start (StartOptions.Tags) or inherited from its parent; empty (nil)
	// when none.
	Tags map[string]string
	// Continue-as-new (see ContinueAsNew): on a workflow, how many of its runs ended before the
	// current one (0 until it first continues as new); on an ended run (StatusContinuedAsNew),
	// that run's number.
	Run uint32
	// On an ended run (StatusContinuedAsNew): the workflow that went on. Empty otherwise.
	ContinuedAsWorkflowID string
}

// Result decodes the output of a successful workflow into out. A failed workflow returns its
// *Failure; one that did not succeed otherwise returns a *NoOutputError.
func (w *Workflow) Result(out any) error {
	switch w.Status {
	case StatusSuccess:
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(w.Output, out); err != nil {
			return fmt.Errorf("waymark: decode output of workflow %s: %w", w.ID, err)
		}
		return nil
	case StatusError:
		if w.Failure != nil {
			return w.Failure
		}
	}
	return &NoOutputError{WorkflowID: w.ID, Status: w.Status}
}

// Output decodes a successful workflow's output as a T; see Workflow.Result.
func Output[T any](w *Workflow) (T, error) {
	var out T
	err := w.Result(&out)
	return out, err
}

// NoOutputError: a workflow has no output because of its status (not finished, cancelled,
// dead-lettered).
type NoOutputError struct {
	WorkflowID string
	Status     Status
}

func (e *NoOutputError) Error() string {
	return fmt.Sprintf("waymark: workflow %s has no output; it is %s", e.WorkflowID, e.Status)
}

// StepRecord is a recorded step of a workflow.
type StepRecord struct {
	ID         uint32
	Name       string
	Output     json.RawMessage
	Failure    *Failure
	Attempts   uint32
	Epoch      uint64
	RecordedAt time.Time
	// When it began, when the server knows (steps a worker ran and said how long they took,
	// retries included; remote steps: their call); zero otherwise.
	StartedAt time.Time
}

// Message is a message sent to a workflow.
type Message struct {
	ID             string
	WorkflowID     string
	Topic          string
	Payload        json.RawMessage
	IdempotencyKey string
	SentAt         time.Time
	Consumed       bool
	ConsumedAt     time.Time
	ConsumedByStep uint32
}

// Event is a workflow's event: its current value and every value it was set to.
type Event struct {
	Key       string
	Value     json.RawMessage
	UpdatedAt time.Time
	History   []EventValue
}

// EventValue is one value an event was set to, by the step that set it.
type EventValue struct {
	Value  json.RawMessage
	StepID uint32
	SetAt  time.Time
}

func timeOf(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// jsonOf reads a payload for display; a payload in another encoding reads as null rather than
// failing the whole answer.
func jsonOf(p *pb.Payload) json.RawMessage {
	raw, err := payloadJSON(p)
	if err != nil {
		return json.RawMessage("null")
	}
	return raw
}

func failureFromWire(f *pb.Failure) *Failure {
	if f == nil {
		return nil
	}
	return &Failure{Kind: f.GetKind(), Message: f.GetMessage()}
}

func workflowFromWire(w *pb.Workflow) *Workflow {
	if w == nil {
		return nil
	}
	out := &Workflow{
		ID:                    w.GetWorkflowId(),
		Name:                  w.GetWorkflowName(),
		Status:                statusFromWire(w.GetStatus()),
		Queue:                 w.GetQueueName(),
		AppVersion:            w.GetAppVersion(),
		Input:                 jsonOf(w.GetInput()),
		Failure:               failureFromWire(w.GetFailure()),
		CreatedAt:             timeOf(w.GetCreatedAt()),
		UpdatedAt:             timeOf(w.GetUpdatedAt()),
		RecoveryAttempts:      w.GetRecoveryAttempts(),
		Epoch:                 w.GetEpoch(),
		WorkerID:              w.GetWorkerId(),
		ParentID:              w.GetParentWorkflowId(),
		Deadline:              timeOf(w.GetDeadline()),
		Priority:              w.GetPriority(),
		PartitionKey:          w.GetPartitionKey(),
		DedupID:               w.GetDedupId(),
		StartedAt:             timeOf(w.GetStartedAt()),
		WakeAt:                timeOf(w.GetWakeAt()),
		Traceparent:           w.GetTraceContext().GetTraceparent(),
		Tracestate:            w.GetTraceContext().GetTracestate(),
		ForkedFromID:          w.GetForkedFromWorkflowId(),
		ForkedFromStep:        w.GetForkedFromStep(),
		Tags:                  maps.Clone(w.GetTags()),
		Run:                   w.GetRun(),
		ContinuedAsWorkflowID: w.GetContinuedAsWorkflowId(),
	}
	if w.GetOutput() != nil {
		out.Output = jsonOf(w.GetOutput())
	}
	return out
}

func stepFromWire(s *pb.Step) StepRecord {
	out := StepRecord{
		ID:         s.GetStepId(),
		Name:       s.GetName(),
		Failure:    failureFromWire(s.GetFailure()),
		Attempts:   s.GetAttempts(),
		Epoch:      s.GetEpoch(),
		RecordedAt: timeOf(s.GetRecordedAt()),
		StartedAt:  timeOf(s.GetStartedAt()),
	}
	if s.GetOutput() != nil {
		out.Output = jsonOf(s.GetOutput())
	}
	return out
}

func messageFromWire(m *pb.Message) Message {
	return Message{
		ID:             m.GetMessageId(),
		WorkflowID:     m.GetWorkflowId(),
		Topic:          m.GetTopic(),
		Payload:        jsonOf(m.GetPayload()),
		IdempotencyKey: m.GetIdempotencyKey(),
		SentAt:         timeOf(m.GetSentAt()),
		Consumed:       m.GetConsumed(),
		ConsumedAt:     timeOf(m.GetConsumedAt()),
		ConsumedByStep: m.GetConsumedByStep(),
	}
}

func eventFromWire(e *pb.Event) Event {
	out := Event{Key: e.GetKey(), Value: jsonOf(e.GetValue()), UpdatedAt: timeOf(e.GetUpdatedAt())}
	for _, h := range e.GetHistory() {
		out.History = append(out.History, EventValue{Value: jsonOf(h.GetValue()), StepID: h.GetStepId(), SetAt: timeOf(h.GetSetAt())})
	}
	return out
}
