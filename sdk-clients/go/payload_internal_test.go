package waymark

import (
	"encoding/json"
	"testing"
	"time"
)

func TestPayloadRoundTripsJSON(t *testing.T) {
	type item struct {
		Name  string         `json:"name"`
		Count int            `json:"count"`
		Tags  []string       `json:"tags"`
		Extra map[string]any `json:"extra"`
	}
	in := item{Name: "Ada", Count: 42, Tags: []string{"a"}, Extra: map[string]any{"ok": true, "none": nil}}
	p, err := toPayload(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := payloadJSON(p)
	if err != nil || string(raw) != `{"count":42,"extra":{"none":null,"ok":true},"name":"Ada","tags":["a"]}` {
		t.Fatalf("json %s %v", raw, err)
	}
	out, err := decodePayload[item](p)
	if err != nil || out.Name != "Ada" || out.Count != 42 || out.Extra["ok"] != true {
		t.Fatalf("decoded %+v %v", out, err)
	}
	if raw, _ := payloadJSON(nil); string(raw) != "null" {
		t.Fatalf("missing payload reads %s", raw)
	}
	if p, _ := toPayload(json.RawMessage(`[1,2.5]`)); string(jsonOf(p)) != `[1,2.5]` {
		t.Fatalf("raw message %s", jsonOf(p))
	}
	if _, err := toPayload(func() {}); err == nil {
		t.Fatal("a func is not JSON")
	}
}

func TestRetryDelayGrowsAndIsCapped(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 5, InitialInterval: 100 * time.Millisecond, Backoff: 2, MaxInterval: 350 * time.Millisecond}
	for attempt, want := range map[uint32]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 350 * time.Millisecond, 60: 350 * time.Millisecond} {
		if got := p.Delay(attempt); got != want {
			t.Errorf("delay(%d) = %v, want %v", attempt, got, want)
		}
	}
	if Attempts(0).normalized().MaxAttempts != 1 {
		t.Error("zero attempts is one")
	}
}

func TestFailureKinds(t *testing.T) {
	cases := map[error]string{
		Fail("Mine", "x"):                            "Mine",
		&StepError{Step: "s", Message: "m"}:          "StepFailed",
		ErrNonDeterminism:                            "NonDeterminism",
		&Error{Reason: "QUEUE_NOT_FOUND"}:            "QUEUE_NOT_FOUND",
		json.Unmarshal([]byte("{"), new(any)):        "Error",
		wrap(&Failure{Kind: "Wrapped", Message: ""}): "Wrapped",
	}
	for err, want := range cases {
		if got := failureOf(err).Kind; got != want {
			t.Errorf("%v: kind %q, want %q", err, got, want)
		}
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func wrap(err error) error { return wrapped{err} }

func TestTargetAcceptsURLs(t *testing.T) {
	for in, want := range map[string]string{"http://h:1": "h:1", "h:2": "h:2", "https://h:3/": "h:3"} {
		e, err := connOptions{server: in}.resolve()
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if e.target != want {
			t.Errorf("target of %q = %q, want %q", in, e.target, want)
		}
	}
}
