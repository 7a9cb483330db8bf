//! Input checks shared by the client and worker APIs. Each failure names the field and the rule.

use super::{EngineError, EngineResult, ErrorCode};

pub const MAX_ID_LEN: usize = 256;

/// Characters that change how text is shown without being visible themselves: bidirectional
/// overrides and isolates (which can make `evil` display as `live`), and zero-width ones (which
/// make two different ids look the same). Refused in ids and names like control characters.
fn is_invisible_formatting(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' // zero-width space, joiners, left-to-right and right-to-left marks
        | '\u{202A}'..='\u{202E}' // bidirectional embeddings and overrides
        | '\u{2060}'..='\u{2064}' // word joiner and invisible operators
        | '\u{2066}'..='\u{2069}' // bidirectional isolates
        | '\u{FEFF}' // zero-width no-break space (byte-order mark)
        | '\u{061C}' // Arabic letter mark
        | '\u{180E}' // Mongolian vowel separator
    )
}

/// Longest a workflow may wait in one step (a receive, an event read): ten years.
const MAX_WAIT_MS: waymark_store::Millis = 10 * 366 * 24 * 3600 * 1000;

/// A workflow's wait deadline (`what`: `recv`, `get_event`): a time between `now` and ten years
/// from now.
pub fn wait_deadline(what: &str, deadline: waymark_store::Millis, now: waymark_store::Millis) -> EngineResult<()> {
    if deadline < 0 || deadline > now + MAX_WAIT_MS {
        return Err(EngineError::invalid(format!(
            "{what} deadline must be a time between now and ten years from now"
        )));
    }
    Ok(())
}

/// Whether `name` matches a key's name pattern: the name itself, or a prefix and a closing `*`.
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

/// Ids and names: 1-256 characters, no control characters, no invisible formatting characters.
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
    if value.chars().any(is_invisible_formatting) {
        return Err(EngineError::invalid(format!(
            "{field} must not contain invisible formatting characters (bidirectional overrides, zero-width characters)"
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

/// The steps a run holds back and sends with its ending (completion or continue-as-new): each
/// name an id-like name, each output within the payload limit. Checked before anything is
/// written, so a bad one leaves the run as it was.
pub fn held_steps(steps: &[waymark_store::NewStep], max_payload: usize) -> EngineResult<()> {
    for step in steps {
        name("step name", &step.name)?;
        if let waymark_store::Outcome::Output(o) = &step.outcome {
            payload("step output", o, max_payload)?;
        }
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
    fn ids_refuse_bidirectional_overrides_and_zero_width_characters() {
        for bad in [
            "ab\u{202E}cd",
            "a\u{200B}b",
            "\u{2066}x\u{2069}",
            "\u{FEFF}id",
            "x\u{200D}y",
        ] {
            let e = name("workflow_id", bad).unwrap_err();
            assert_eq!(e.reason, "INVALID_ARGUMENT", "{bad:?}");
            assert!(e.message.contains("invisible"), "{}", e.message);
        }
        // Ordinary text in any script stays welcome.
        for good in ["订单-42", "naïve", "שלום", "emoji-🚀", "a b"] {
            assert!(name("workflow_id", good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn payload_limit_is_resource_exhausted() {
        let e = payload("input", "12345", 4).unwrap_err();
        assert_eq!((e.code, e.reason), (ErrorCode::ResourceExhausted, "PAYLOAD_TOO_LARGE"));
        assert!(payload("input", "1234", 4).is_ok());
    }
}
