package waymark

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error is a request the server refused (or could not be reached for). Reason is the stable
// ErrorInfo reason a program matches on (WORKFLOW_NOT_FOUND, DEDUP_ID_TAKEN, STALE_EPOCH, …);
// Message is safe to show. Match it with errors.As:
//
//	var werr *waymark.Error
//	if errors.As(err, &werr) && werr.Reason == "WORKFLOW_NOT_FOUND" { … }
type Error struct {
	Code    codes.Code
	Reason  string
	Message string
	// ErrorInfo metadata, e.g. holder_workflow_id on DEDUP_ID_TAKEN.
	Metadata map[string]string
}

func (e *Error) Error() string {
	return fmt.Sprintf("waymark: %s (%s)", e.Message, e.Reason)
}

// Is lets errors.Is(err, context.DeadlineExceeded) and context.Canceled match the gRPC codes,
// so a call bounded by its context reads like any other Go call that ran out of time; and
// ErrPayloadTooLarge match reason PAYLOAD_TOO_LARGE, whether the server or the SDK refused.
func (e *Error) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	case context.Canceled:
		return e.Code == codes.Canceled
	case ErrPayloadTooLarge:
		return e.Reason == reasonPayloadTooLarge
	}
	return false
}

// ErrPayloadTooLarge matches, with errors.Is, anything refused for its size (reason
// PAYLOAD_TOO_LARGE): a value larger than the server takes (Welcome's max_payload_bytes), or
// a request that would make a message larger than it takes. A workflow gets it from Send,
// SetEvent, WriteStream, StartChild and StartStep, which send nothing then, and as a
// *StepError from a step whose output is too large.
var ErrPayloadTooLarge = errors.New("waymark: payload too large")

// IsReason reports whether err is (or wraps) an *Error with this ErrorInfo reason, or a
// *StepError whose recorded failure has this kind.
func IsReason(err error, reason string) bool {
	var e *Error
	if errors.As(err, &e) && e.Reason == reason {
		return true
	}
	var s *StepError
	return errors.As(err, &s) && s.Reason == reason
}

// rpcError converts a gRPC error into an *Error, taking the reason from its ErrorInfo and
// falling back to the code's name (what the server uses when it has nothing more specific).
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: s.Code(), Message: s.Message(), Reason: codeReason(s.Code())}
	for _, d := range s.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			e.Reason = info.GetReason()
			e.Metadata = info.GetMetadata()
		}
	}
	return e
}

// codeReason spells a gRPC code the way ErrorInfo reasons are spelled: DEADLINE_EXCEEDED.
func codeReason(c codes.Code) string {
	var b strings.Builder
	for i, r := range c.String() {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// Errors that end a workflow's run without failing it: someone else is (or will be)
// responsible for it. A workflow function should return them as it gets them.
var (
	// ErrCancelled: the workflow was cancelled; it stops at its next step or wait.
	ErrCancelled = errors.New("waymark: workflow cancelled")
	// ErrParked: the workflow was released from this worker while it waits; the server
	// dispatches it again when the wait resolves.
	ErrParked = errors.New("waymark: workflow parked until its wait resolves")
	// ErrFenced: another dispatch owns the workflow now (this worker was presumed dead).
	ErrFenced = errors.New("waymark: workflow taken over by another dispatch")
	// ErrDisconnected: the stream to the server broke; the server hands the workflow out again.
	// A run it ends is dropped: its operations return ErrDropped wrapping this.
	ErrDisconnected = errors.New("waymark: disconnected from the server")
)

// ErrNonDeterminism: a replay called a different step than the history records at that
// position. The workflow fails with kind NonDeterminism.
var ErrNonDeterminism = errors.New("waymark: non-determinism")

// Failure is why a workflow or a step failed, as recorded: Kind is stable and
// machine-matchable ("StepFailed", "NonDeterminism", "ChildFailed", or one of yours), Message
// is for people. Return one from a workflow to fail it with a kind of your choosing.
type Failure struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (f *Failure) Error() string {
	if f.Kind == "" {
		return f.Message
	}
	return f.Kind + ": " + f.Message
}

// Fail makes a *Failure: a workflow returning it fails with this kind.
func Fail(kind, format string, args ...any) error {
	return &Failure{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// StepError is a step that failed for good: its retries were exhausted, or its output was
// larger than the server takes. It is recorded, so a replay fails the same way. A workflow
// that returns it fails with kind StepFailed.
type StepError struct {
	Step    string
	Message string
	// The kind recorded for the step's failure: StepFailed, or PAYLOAD_TOO_LARGE (also matched
	// by errors.Is with ErrPayloadTooLarge) when its output was too large to record.
	Reason string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("waymark: step %q failed: %s", e.Step, e.Message)
}

// Kind is the failure kind recorded for a workflow that returns this error.
func (e *StepError) Kind() string { return "StepFailed" }

// Is matches ErrPayloadTooLarge when the step's output was too large.
func (e *StepError) Is(target error) bool {
	return target == ErrPayloadTooLarge && e.Reason == reasonPayloadTooLarge
}

// failureOf is what a workflow's error is recorded as. Any error with a Kind() string method
// chooses its kind; otherwise the kind is "Error".
func failureOf(err error) *Failure {
	if f, ok := err.(*Failure); ok {
		return f
	}
	var f *Failure
	kind := "Error"
	var k interface{ Kind() string }
	var rpc *Error
	switch {
	case errors.Is(err, ErrNonDeterminism):
		kind = "NonDeterminism"
	case errors.As(err, &k):
		kind = k.Kind()
	case errors.As(err, &f):
		kind = f.Kind
	case errors.As(err, &rpc):
		kind = rpc.Reason
	}
	return &Failure{Kind: kind, Message: err.Error()}
}

// isInterruption: the run ends without a completion (a replay's, without an outcome of the
// code's: it is Suspended).
func isInterruption(err error) bool {
	return errors.Is(err, ErrCancelled) || errors.Is(err, ErrParked) ||
		errors.Is(err, ErrFenced) || errors.Is(err, ErrDisconnected) || errors.Is(err, ErrDropped) ||
		errors.Is(err, ErrHistoryEnded)
}
