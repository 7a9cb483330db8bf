package waymark

import (
	"encoding/json"
	"errors"
	"fmt"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// ContinueAsNew ends this run of the workflow and starts it again under its id with input and
// an empty history — for a workflow that loops for ever (polling, a schedule of its own), so
// its history stays short. Return it from the workflow function as its error:
//
//	if n < until {
//		return 0, waymark.ContinueAsNew(loop{N: n + 1, Until: until})
//	}
//
// It is not a failure. The steps this run recorded are kept with the ended run, a finished
// workflow of its own `<id>/run-<n>` (status CONTINUED_AS_NEW); awaiters, the parent and
// senders of messages keep using the workflow's id, and messages not yet read wait for the
// next run. Nothing is recorded at a position, so a replay of this run reaches the same call
// and ends the same way (a Replayer reports ContinuedAsNew). An input that cannot be encoded as
// JSON fails the workflow with kind Serialization; one larger than the server takes fails it
// with kind PAYLOAD_TOO_LARGE, as an output that large does.
//
// The worker recognises it with errors.As, so it may be wrapped; return it as the workflow's
// error, not from a step (a step's error is the step's failure).
func ContinueAsNew(input any) error {
	p, err := toPayload(input)
	if err != nil {
		return &Failure{Kind: "Serialization", Message: fmt.Sprintf("the next run's input: %v", err)}
	}
	return &ContinueAsNewError{input: p}
}

// ContinueAsNewError is the error ContinueAsNew makes: the run ends and the workflow goes on
// with Input. Match it with errors.As.
type ContinueAsNewError struct {
	input *pb.Payload
}

func (e *ContinueAsNewError) Error() string { return "waymark: continued as new" }

// Input is the next run's input, as JSON.
func (e *ContinueAsNewError) Input() json.RawMessage {
	raw, err := payloadJSON(e.input)
	if err != nil {
		return json.RawMessage("null")
	}
	return raw
}

// continuedAsNew is the next run's input when err asks to continue as new.
func continuedAsNew(err error) (*pb.Payload, bool) {
	if c, ok := errors.AsType[*ContinueAsNewError](err); ok && c != nil {
		return c.input, true
	}
	return nil, false
}
