//! A workflow's journal: what each durable operation records as a step, and how a replay
//! checks and reads it back. Every SDK and the server's store record the same step names and
//! JSON shapes, so a workflow begun by one worker replays on any other; in Rust they live here
//! once, and nowhere else.
//!
//! - [`names`]: the built-in step names, and which side records each.
//! - [`shapes`]: one type per recorded shape, with how it is written and read.
//! - [`history`]: the cursor a run replays through: positions in call order, and what is
//!   recorded at each.
//! - [`NonDeterminism`]: the one error a replay that diverges from its history gets.
//! - [`updates`]: the topic an update travels on and the event that answers it.
//! - [`retry`] and [`select`]: decisions about remote steps and waits over several targets,
//!   made the same way wherever they are made.
//!
//! No I/O and no async runtime: everything here is tested with plain values.

pub mod history;
pub mod names;
mod nondeterminism;
pub mod retry;
pub mod select;
pub mod shapes;
pub mod updates;

pub use history::{History, Patched, Recorded, RecordedOutcome};
pub use nondeterminism::NonDeterminism;

/// A recorded step whose JSON is not the shape its name promises (a corrupt or foreign history).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub step_name: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the recorded {} step is malformed", self.step_name)
    }
}

impl std::error::Error for Malformed {}
