//! The error a replay gets when the workflow's code calls another step than its history records
//! at that position: the code that is running is not the code that ran.

/// Step `step_id` of `workflow_id` is recorded as `recorded`; the replay called `presented`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonDeterminism {
    pub workflow_id: String,
    pub step_id: u32,
    pub recorded: String,
    pub presented: String,
}

impl NonDeterminism {
    /// Ok when the step recorded at `step_id` is named `presented`.
    pub fn check(workflow_id: &str, step_id: u32, recorded: &str, presented: &str) -> Result<(), NonDeterminism> {
        if recorded == presented {
            return Ok(());
        }
        Err(NonDeterminism {
            workflow_id: workflow_id.to_string(),
            step_id,
            recorded: recorded.to_string(),
            presented: presented.to_string(),
        })
    }
}

impl std::fmt::Display for NonDeterminism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "workflow {:?} called step {:?} at position {}, where its history records {:?}",
            self.workflow_id, self.presented, self.step_id, self.recorded
        )
    }
}

impl std::error::Error for NonDeterminism {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_name_passes_and_another_is_named_in_the_error() {
        assert_eq!(NonDeterminism::check("w", 3, "a", "a"), Ok(()));
        let e = NonDeterminism::check("w", 3, "a", "b").unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"workflow "w" called step "b" at position 3, where its history records "a""#
        );
    }
}
