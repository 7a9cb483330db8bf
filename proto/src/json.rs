//! JSON values to and from the wire `Payload` (a `google.protobuf.Value`).
//!
//! `google.protobuf.Value` carries every number as a double. Integral values that fit an `i64`
//! come back as JSON integers, so `1` stays `1` rather than becoming `1.0`.
use prost_types::{value::Kind, ListValue, Struct, Value};
use serde_json::{Map, Number, Value as Json};

use crate::v1::{payload::Content, Payload};

/// A JSON value as a payload.
pub fn to_payload(value: &Json) -> Payload {
    Payload {
        content: Some(Content::Json(to_value(value))),
        encoding: String::new(),
    }
}

/// The JSON value inside a payload. A missing payload or an empty one reads as `null`.
/// Binary payloads are not JSON and are refused.
pub fn from_payload(payload: Option<&Payload>) -> Result<Json, PayloadError> {
    let Some(p) = payload else {
        return Ok(Json::Null);
    };
    if !(p.encoding.is_empty() || p.encoding == "json") {
        return Err(PayloadError::UnsupportedEncoding(p.encoding.clone()));
    }
    match &p.content {
        None => Ok(Json::Null),
        Some(Content::Json(v)) => from_value(v),
        Some(Content::Binary(_)) => Err(PayloadError::UnsupportedEncoding("binary".into())),
    }
}

/// Why a payload could not be read as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PayloadError {
    /// The payload is in an encoding this program does not read.
    UnsupportedEncoding(String),
    /// A number that JSON cannot hold (NaN or infinite).
    NonFiniteNumber,
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// How deeply arrays and objects may nest in a payload. Deeper values are refused rather than
/// walked: each level costs stack in every program that reads them (and the protobuf decoders
/// stop at about 48 levels of JSON anyway).
pub const MAX_DEPTH: usize = 32;

impl std::fmt::Display for PayloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PayloadError::UnsupportedEncoding(e) => {
                write!(f, "payload encoding {e:?} is not supported; use JSON")
            }
            PayloadError::NonFiniteNumber => {
                write!(f, "payload holds a number JSON cannot represent (NaN or infinity)")
            }
            PayloadError::TooDeep => {
                write!(f, "payload nests arrays and objects deeper than {MAX_DEPTH} levels")
            }
        }
    }
}

impl std::error::Error for PayloadError {}

/// A JSON value as a `google.protobuf.Value`.
pub fn to_value(value: &Json) -> Value {
    let kind = match value {
        Json::Null => Kind::NullValue(0),
        Json::Bool(b) => Kind::BoolValue(*b),
        Json::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Json::String(s) => Kind::StringValue(s.clone()),
        Json::Array(items) => Kind::ListValue(ListValue {
            values: items.iter().map(to_value).collect(),
        }),
        Json::Object(map) => Kind::StructValue(Struct {
            fields: map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect(),
        }),
    };
    Value { kind: Some(kind) }
}

/// A `google.protobuf.Value` as JSON.
pub fn from_value(value: &Value) -> Result<Json, PayloadError> {
    from_value_within(value, MAX_DEPTH)
}

fn from_value_within(value: &Value, depth_left: usize) -> Result<Json, PayloadError> {
    let nested = |v: &Value| {
        if depth_left == 0 {
            Err(PayloadError::TooDeep)
        } else {
            from_value_within(v, depth_left - 1)
        }
    };
    Ok(match &value.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::BoolValue(b)) => Json::Bool(*b),
        Some(Kind::NumberValue(n)) => number(*n)?,
        Some(Kind::StringValue(s)) => Json::String(s.clone()),
        Some(Kind::ListValue(l)) => Json::Array(l.values.iter().map(nested).collect::<Result<_, _>>()?),
        Some(Kind::StructValue(s)) => {
            let mut map = Map::new();
            for (k, v) in &s.fields {
                map.insert(k.clone(), nested(v)?);
            }
            Json::Object(map)
        }
    })
}

fn number(n: f64) -> Result<Json, PayloadError> {
    if !n.is_finite() {
        return Err(PayloadError::NonFiniteNumber);
    }
    // 2^63 as f64; integral doubles inside (-2^63, 2^63) convert to i64 exactly.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if n.fract() == 0.0 && n > -LIMIT && n < LIMIT {
        return Ok(Json::Number(Number::from(n as i64)));
    }
    Ok(Number::from_f64(n).map(Json::Number).unwrap_or(Json::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_json_with_integers_kept_integral() {
        let v = json!({"name": "Ada", "n": 1, "f": 1.5, "neg": -7, "list": [true, null, "x"], "nested": {"a": {}}});
        let back = from_payload(Some(&to_payload(&v))).unwrap();
        assert_eq!(back, v);
        assert_eq!(serde_json::to_string(&back["n"]).unwrap(), "1");
    }

    #[test]
    fn missing_payload_is_null_and_binary_is_refused() {
        assert_eq!(from_payload(None).unwrap(), Json::Null);
        let bin = Payload {
            content: Some(Content::Binary(vec![1, 2])),
            encoding: "msgpack".into(),
        };
        assert_eq!(
            from_payload(Some(&bin)),
            Err(PayloadError::UnsupportedEncoding("msgpack".into()))
        );
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused() {
        let nest = |levels: usize| (0..levels).fold(json!(1), |v, _| json!([v]));
        assert_eq!(
            from_payload(Some(&to_payload(&nest(MAX_DEPTH)))).unwrap(),
            nest(MAX_DEPTH)
        );
        assert_eq!(
            from_payload(Some(&to_payload(&nest(MAX_DEPTH + 1)))),
            Err(PayloadError::TooDeep)
        );
        let objects = (0..MAX_DEPTH + 1).fold(json!(1), |v, _| json!({ "a": v }));
        assert_eq!(from_payload(Some(&to_payload(&objects))), Err(PayloadError::TooDeep));
    }

    #[test]
    fn non_finite_numbers_are_refused() {
        let v = Value {
            kind: Some(Kind::NumberValue(f64::NAN)),
        };
        assert_eq!(from_value(&v), Err(PayloadError::NonFiniteNumber));
    }
}
