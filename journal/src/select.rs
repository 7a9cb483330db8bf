//! Waits over several targets (`select`: the first to finish; `wait_all`: all of them), and
//! which target decides one.

use crate::names;

/// Whether a wait over several targets ends at the first or after all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitFor {
    First,
    All,
}

impl WaitFor {
    /// The step the wait records.
    pub fn step_name(self) -> &'static str {
        match self {
            WaitFor::First => names::SELECT,
            WaitFor::All => names::WAIT_ALL,
        }
    }

    /// Decides the wait, `done_at[i]` being when target `i` finished (if it has). First: among
    /// those done, the earliest to finish (ties to the lower index). All: once every one is
    /// done, the last to finish (ties to the lower index).
    pub fn decide<T: Ord + Copy>(self, done_at: &[Option<T>]) -> Option<u32> {
        let done = done_at.iter().enumerate().filter_map(|(i, t)| t.map(|t| (t, i)));
        let pick = match self {
            WaitFor::First => done.min(),
            WaitFor::All if done_at.iter().all(Option::is_some) => done.max_by_key(|&(t, i)| (t, std::cmp::Reverse(i))),
            WaitFor::All => None,
        };
        pick.map(|(_, i)| i as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::WaitFor::*;

    #[test]
    fn first_and_all() {
        assert_eq!(First.decide::<i64>(&[None, None]), None);
        assert_eq!(First.decide(&[Some(5), Some(3), Some(3)]), Some(1));
        assert_eq!(All.decide(&[Some(5), None]), None);
        assert_eq!(All.decide(&[Some(5), Some(9), Some(9)]), Some(1));
    }
}
