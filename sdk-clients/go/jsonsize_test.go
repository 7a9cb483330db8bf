package waymark

import (
	"encoding/json"
	"math"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// jsonSize counts the JSON text the server writes for a payload. Each case is a value and that
// text, written out by hand the way the server writes it (compact; <, > and & as themselves;
// only quotes, backslashes and control characters escaped).
func TestJSONSizeIsTheServersText(t *testing.T) {
	cases := map[string]string{
		`null`:                      `null`,
		`true`:                      `true`,
		`false`:                     `false`,
		` [ 1 , 2.5 , "x" ] `:       `[1,2.5,"x"]`,
		`{"a": {"b": []}, "c": {}}`: `{"a":{"b":[]},"c":{}}`,
		`"<a&b>"`:                   `"<a&b>"`,
		`"q\"b\\n\n\t\r\b\f"`:       `"q\"b\\n\n\t\r\b\f"`,
		`"\u0001\u001f\u007f"`:      "\"\\u0001\\u001f\x7f\"",
		`"é€😀"`:                     `"é€😀"`,
		`{"k\"ey": "v"}`:            `{"k\"ey":"v"}`,
	}
	for in, want := range cases {
		p, err := toPayload(json.RawMessage(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := jsonSize(p); got != len(want) {
			t.Errorf("%s: %d bytes, want %d (%s)", in, got, len(want), want)
		}
	}
	if got := jsonSize(nil); got != len("null") {
		t.Errorf("a missing payload counts %d bytes", got)
	}
}

// Numbers are written as the server writes them: integers when integral and inside the int64
// range, else the shortest digits that read back, plainly near the point and in scientific
// form (no plus sign, no leading zeros in the exponent) beyond.
func TestJSONSizeOfNumbers(t *testing.T) {
	cases := map[float64]string{
		0:                    "0",
		math.Copysign(0, -1): "0",
		1:                    "1",
		-7:                   "-7",
		1e16:                 "10000000000000000",
		-9.2e18:              "-9200000000000000000",
		9.3e18:               "9.3e18",
		1e20:                 "1e20",
		2.5:                  "2.5",
		-0.5:                 "-0.5",
		123456.789:           "123456.789",
		1.0000000000000002:   "1.0000000000000002",
		0.001:                "0.001",
		0.00001:              "0.00001",
		0.000001:             "1e-6",
		1.5e-7:               "1.5e-7",
		-1.25e300:            "-1.25e300",
		5e-324:               "5e-324",
		1234567890123.5:      "1234567890123.5",
		1.5e25:               "1.5e25",
	}
	for f, want := range cases {
		if got := valueSize(structpb.NewNumberValue(f)); got != len(want) {
			t.Errorf("%v: %d bytes, want %d (%s)", f, got, len(want), want)
		}
	}
}
