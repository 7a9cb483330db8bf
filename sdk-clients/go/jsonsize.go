package waymark

import (
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/waymark-dev/waymark/sdk-clients/go/gen/waymark/v1"
)

// The server's payload limit counts the bytes of a payload's JSON text as the server writes it:
// compact, strings escaped only where JSON requires it, a number with no fraction (inside the
// int64 range) as an integer, any other number in its shortest form. jsonSize counts the same
// bytes by walking the value, so the SDK refuses what the server would refuse and nothing
// else — without writing out a text that may run to megabytes. (encoding/json would count
// more: it escapes <, > and &.)

// jsonSize is the length in bytes of p's JSON text; a missing payload is null.
func jsonSize(p *pb.Payload) int {
	switch c := p.GetContent().(type) {
	case *pb.Payload_Json:
		return valueSize(c.Json)
	case *pb.Payload_Binary:
		// Not JSON (the server refuses it); its bytes are still what it weighs.
		return len(c.Binary)
	}
	return len("null")
}

func valueSize(v *structpb.Value) int {
	switch k := v.GetKind().(type) {
	case *structpb.Value_BoolValue:
		if k.BoolValue {
			return len("true")
		}
		return len("false")
	case *structpb.Value_NumberValue:
		return numberSize(k.NumberValue)
	case *structpb.Value_StringValue:
		return stringSize(k.StringValue)
	case *structpb.Value_ListValue:
		items := k.ListValue.GetValues()
		n := len("[]") + max(len(items)-1, 0) // brackets and commas
		for _, item := range items {
			n += valueSize(item)
		}
		return n
	case *structpb.Value_StructValue:
		fields := k.StructValue.GetFields()
		n := len("{}") + max(len(fields)-1, 0)
		for key, item := range fields {
			n += stringSize(key) + len(":") + valueSize(item)
		}
		return n
	}
	return len("null")
}

// stringSize is the length of s as a JSON string: quotes, and each character as itself
// except a quote, a backslash and the control characters, which are escaped.
func stringSize(s string) int {
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n++ // a backslash before a letter
		case c < 0x20:
			n += len(`\u0000`) - 1
		}
	}
	return n
}

// int64Bound is 2^63: integral numbers strictly inside ±2^63 are written as integers.
const int64Bound = float64(1 << 63)

// numberSize is the length of a number as the server writes it. NaN and infinities are not
// JSON (toPayload cannot make them); they count as the null that stands in for them.
func numberSize(f float64) int {
	var buf [32]byte
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return len("null")
	case f == float64(int64(f)) && f > -int64Bound && f < int64Bound:
		return len(strconv.AppendInt(buf[:0], int64(f), 10))
	}
	// The shortest digits that read back as f, and where the decimal point goes.
	e := string(strconv.AppendFloat(buf[:0], f, 'e', -1, 64)) // -d.ddde±XX
	sign := 0
	if e[0] == '-' {
		sign, e = 1, e[1:]
	}
	mantissa, exp, _ := strings.Cut(e, "e")
	digits := len(strings.Replace(mantissa, ".", "", 1))
	x, _ := strconv.Atoi(exp)
	// The value is 0.DIGITS × 10^point. The shortest form writes it plainly when the point
	// falls within the first 16 places, or a few places before the digits, and in scientific
	// form otherwise.
	point := x + 1
	switch {
	case point > 0 && point <= 16 && point >= digits:
		return sign + point + len(".0") // DIGITS, zeros, ".0"
	case point > 0 && point <= 16:
		return sign + digits + len(".")
	case point > -5 && point <= 0:
		return sign + len("0.") - point + digits
	}
	n := sign + digits + len("e") + len(strconv.Itoa(point-1))
	if digits > 1 {
		n += len(".")
	}
	return n
}
