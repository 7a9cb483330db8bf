//! Tags: key/value labels a workflow carries from its start, to find it by. Their bounds are
//! checked here for every way they come in (a start, a child start, a listing's filter), so a
//! client cannot grow a row or the tag index without limit.

use waymark_store::Tags;

use super::{EngineError, EngineResult};

/// Most tags on one workflow, and in one listing's filter.
pub const MAX_TAGS: usize = 16;
/// Longest tag key, in characters.
pub const MAX_KEY_LEN: usize = 64;
/// Longest tag value, in characters.
pub const MAX_VALUE_LEN: usize = 256;

/// Keys are 1-64 of `[A-Za-z0-9_.-/]`: no `=`, which separates key from value in the index.
fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.chars().count() <= MAX_KEY_LEN
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
}

/// Checks a set of tags given as `field` (at most 16, keys and values within their bounds).
pub fn validate(field: &str, tags: &Tags) -> EngineResult<()> {
    if tags.len() > MAX_TAGS {
        return Err(EngineError::invalid(format!(
            "{field} has {} tags; at most {MAX_TAGS} are allowed",
            tags.len()
        )));
    }
    for (key, value) in tags {
        if !valid_key(key) {
            return Err(EngineError::invalid(format!(
                "{field}: tag key {:?} must be 1-{MAX_KEY_LEN} letters, digits or `_ - . /`",
                key.chars().take(MAX_KEY_LEN + 1).collect::<String>()
            )));
        }
        if value.chars().count() > MAX_VALUE_LEN {
            return Err(EngineError::invalid(format!(
                "{field}: the value of tag {key:?} is longer than {MAX_VALUE_LEN} characters"
            )));
        }
        if value.chars().any(char::is_control) {
            return Err(EngineError::invalid(format!(
                "{field}: the value of tag {key:?} must not contain control characters"
            )));
        }
    }
    Ok(())
}

/// A child's tags: its parent's, with the child start's own replacing or adding keys. The
/// result is bounded like any workflow's tags.
pub fn inherit(parent: &Tags, own: Tags) -> EngineResult<Tags> {
    let mut tags = parent.clone();
    tags.extend(own);
    validate("tags (the parent's with the child's own)", &tags)?;
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn bounds_are_checked() {
        assert!(validate("tags", &tags(&[("team", "payments"), ("k8s.io/app", "a=b c")])).is_ok());
        assert!(validate("tags", &Tags::new()).is_ok());
        for bad in ["", "a=b", "has space", "é", &"k".repeat(65)] {
            let e = validate("tags", &tags(&[(bad, "v")])).unwrap_err();
            assert_eq!(e.reason, "INVALID_ARGUMENT", "{bad:?}");
        }
        assert!(validate("tags", &tags(&[(&"k".repeat(64), &"v".repeat(256))])).is_ok());
        assert!(validate("tags", &tags(&[("k", &"v".repeat(257))])).is_err());
        assert!(validate("tags", &tags(&[("k", "a\nb")])).is_err());
        let many: Tags = (0..17).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(validate("tags", &many).unwrap_err().message.contains("at most 16"));
    }

    #[test]
    fn a_child_inherits_and_overrides_per_key() {
        let parent = tags(&[("team", "payments"), ("env", "prod")]);
        let child = inherit(&parent, tags(&[("env", "canary"), ("step", "refund")])).unwrap();
        assert_eq!(
            child,
            tags(&[("env", "canary"), ("step", "refund"), ("team", "payments")])
        );
        let full: Tags = (0..16).map(|i| (format!("p{i}"), String::new())).collect();
        assert!(inherit(&full, tags(&[("one", "more")])).is_err());
        assert_eq!(inherit(&full, tags(&[("p3", "x")])).unwrap().len(), 16);
    }
}
