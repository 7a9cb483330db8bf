package waymark

import (
	"context"
	"log/slog"
)

// Context is what a workflow function gets: a context.Context that is cancelled when the
// workflow is cancelled, parked, taken over or dropped by this worker — its stream broke, or
// the server stayed unavailable (context.Cause says which: ErrCancelled, ErrParked, ErrFenced,
// ErrDropped, which wraps ErrDisconnected when the stream broke), and the workflow's identity.
// Pass it to Step, Sleep, Recv and the other functions of this package; pass it (or a context
// derived from it) to anything else that takes a context.Context.
type Context interface {
	context.Context
	// WorkflowID is the id of the running workflow.
	WorkflowID() string
	// WorkflowName is the name it was registered under.
	WorkflowName() string
	// Epoch is the fencing epoch of this run: it rises each time the workflow is dispatched.
	Epoch() uint64
	// RecoveryAttempts is how many times this workflow was recovered from a worker that died.
	RecoveryAttempts() uint32
	// Logger is the worker's logger with the workflow's id and name attached.
	Logger() *slog.Logger

	// run seals the interface: only the SDK makes workflow contexts.
	run() *run
}

func (r *run) WorkflowID() string       { return r.id }
func (r *run) WorkflowName() string     { return r.name }
func (r *run) Epoch() uint64            { return r.epoch }
func (r *run) RecoveryAttempts() uint32 { return r.recoveryAttempts }
func (r *run) Logger() *slog.Logger     { return r.logger }
func (r *run) run() *run                { return r }
