package waymark

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// Values travel as a google.protobuf.Value inside a Payload: JSON that grpcurl and every SDK
// show inline. Go values are encoded with encoding/json first, so struct tags apply.

// toPayload encodes v as a JSON payload. A json.RawMessage is taken as it is.
func toPayload(v any) (*pb.Payload, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("waymark: encode value as JSON: %w", err)
		}
		raw = b
	}
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, fmt.Errorf("waymark: value is not JSON: %w", err)
	}
	val, err := structpb.NewValue(generic)
	if err != nil {
		return nil, fmt.Errorf("waymark: encode value: %w", err)
	}
	return &pb.Payload{Content: &pb.Payload_Json{Json: val}}, nil
}

// payloadJSON is the JSON inside a payload; a missing or empty payload reads as null.
func payloadJSON(p *pb.Payload) (json.RawMessage, error) {
	if p == nil {
		return json.RawMessage("null"), nil
	}
	if p.GetEncoding() != "" && p.GetEncoding() != "json" {
		return nil, fmt.Errorf("waymark: payload encoding %q is not supported; use JSON", p.GetEncoding())
	}
	switch c := p.GetContent().(type) {
	case nil:
		return json.RawMessage("null"), nil
	case *pb.Payload_Json:
		b, err := json.Marshal(c.Json.AsInterface())
		if err != nil {
			return nil, fmt.Errorf("waymark: payload is not JSON: %w", err)
		}
		return b, nil
	default:
		return nil, fmt.Errorf("waymark: binary payloads are not supported; use JSON")
	}
}

// decodePayload reads a payload into a T.
func decodePayload[T any](p *pb.Payload) (T, error) {
	var out T
	raw, err := payloadJSON(p)
	if err != nil {
		return out, err
	}
	return decodeJSON[T](raw)
}

func decodeJSON[T any](raw json.RawMessage) (T, error) {
	var out T
	if len(raw) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("waymark: decode %T from JSON: %w", out, err)
	}
	return out, nil
}

// mustJSON renders a map the SDK builds itself (step records of waits); it cannot fail.
func mustPayload(v map[string]any) *pb.Payload {
	p, err := toPayload(v)
	if err != nil {
		panic(err)
	}
	return p
}
