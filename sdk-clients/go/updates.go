package waymark

import (
	"encoding/json"
	"fmt"
	"time"
)

// Workflow updates, the workflow's side: take the next update a client sent (Client.
// UpdateWorkflow) and answer it. An update arrives as a message on topic
// "waymark.update/<name>", and the answer is the workflow's event "waymark.update/<update id>",
// which the client's call waits for; both are recorded like any receive and event, so a replay
// takes the same update and answers it once.

// updatePrefix begins every update topic and answer key (the server's updates.rs says the same).
const updatePrefix = "waymark.update/"

// Update is an update a client sent: its id (what the answer is for) and its arguments.
type Update[A any] struct {
	ID   string
	Args A
}

// updateMessage is an update as the server delivers it.
type updateMessage struct {
	UpdateID string          `json:"update_id"`
	Args     json.RawMessage `json:"args"`
}

// RecvUpdate waits up to timeout for the next update named name; ok is false when none came.
// Answer it with AnswerUpdate or RejectUpdate: the client's call waits for that. Whatever runs
// between is ordinary workflow code (steps, waits, sends), recorded as always. It is a Recv on
// the update's topic, recorded as one. An update whose arguments do not decode as an A is
// rejected here, saying so, and the wait goes on for the next (with the whole timeout again):
// a client cannot fail the workflow by sending the wrong shape. With A any or json.RawMessage
// every update is taken.
func RecvUpdate[A any](ctx Context, name string, timeout time.Duration) (u Update[A], ok bool, err error) {
	topic := updatePrefix + name
	for {
		raw, ok, err := Recv[json.RawMessage](ctx, topic, timeout)
		if err != nil || !ok {
			return u, false, err
		}
		// The server sends nothing else on an update topic; from an older one, a message that
		// is no update has no id to answer, and is passed over (as in Rust).
		var m updateMessage
		if json.Unmarshal(raw, &m) != nil || m.UpdateID == "" {
			continue
		}
		var args A
		if len(m.Args) > 0 {
			err = json.Unmarshal(m.Args, &args)
		}
		if err == nil {
			return Update[A]{ID: m.UpdateID, Args: args}, true, nil
		}
		if err := RejectUpdate(ctx, m.UpdateID, fmt.Sprintf("its arguments do not fit: %v", err)); err != nil {
			return u, false, err
		}
	}
}

// AnswerUpdate answers update updateID: the client's call returns result. Recorded as the
// event "waymark.update/<updateID>" (a SetEvent); a replay does not answer again.
func AnswerUpdate(ctx Context, updateID string, result any) error {
	return SetEvent(ctx, updatePrefix+updateID, map[string]any{"result": result})
}

// RejectUpdate refuses update updateID: the client's call fails with reason UPDATE_REJECTED
// and why in its message. Recorded as AnswerUpdate is.
func RejectUpdate(ctx Context, updateID, why string) error {
	return SetEvent(ctx, updatePrefix+updateID, map[string]string{"rejected": why})
}
