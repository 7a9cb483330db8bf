//! Input checks shared by the client and worker APIs. Each failure names the field and the rule.

use super::{EngineError, EngineResult, ErrorCode};

pub const MAX_ID_LEN: usize = 256;

/// Ids and names: 1-256 characters, no control characters.
pub fn name(field: &str, value: &str) -> EngineResult<()> {
    if value.is_empty() {
        return Err(EngineError::invalid(format!("{field} must not be empty")));
    }
    if value.chars().count() > MAX_ID_LEN {
        return Err(EngineError::invalid(format!(
            "{field} is longer than {MAX_ID_LEN} characters"
        )));
    }
    if value.chars().any(char::is_control) {
        return Err(EngineError::invalid(format!(
            "{field} must not contain control characters"
        )));
    }
    Ok(())
}

/// Optional names: empty means "not given".
pub fn optional_name(field: &str, value: &str) -> EngineResult<()> {
    if value.is_empty() {
        Ok(())
    } else {
        name(field, value)
    }
}

/// JSON text within the payload limit.
pub fn payload(field: &str, json: &str, max: usize) -> EngineResult<()> {
    if json.len() > max {
        return Err(EngineError::new(
            ErrorCode::ResourceExhausted,
            "PAYLOAD_TOO_LARGE",
            format!("{field} is {} bytes; the limit is {max} bytes", json.len()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(name("workflow_id", "order-42").is_ok());
        assert_eq!(name("workflow_id", "").unwrap_err().reason, "INVALID_ARGUMENT");
        assert!(name("workflow_id", &"x".repeat(257))
            .unwrap_err()
            .message
            .contains("longer than 256"));
        assert!(name("workflow_id", &"é".repeat(256)).is_ok());
        assert!(name("workflow_id", "a\nb").is_err());
        assert!(optional_name("queue_name", "").is_ok());
    }

    #[test]
    fn payload_limit_is_resource_exhausted() {
        let e = payload("input", "12345", 4).unwrap_err();
        assert_eq!((e.code, e.reason), (ErrorCode::ResourceExhausted, "PAYLOAD_TOO_LARGE"));
        assert!(payload("input", "1234", 4).is_ok());
    }
}
