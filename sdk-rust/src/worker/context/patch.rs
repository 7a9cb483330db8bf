//! Changing workflow code safely while old runs are still going: `patched` tells new code
//! whether this run began under it (take the new branch) or under code without the change
//! (replay the old branch), by a marker the new branch records (`waymark.patch`).

use waymark_journal::{names, shapes, Patched};

use super::{shape_payload, WorkflowContext};
use crate::WorkflowError;

impl WorkflowContext {
    /// Whether this run takes the branch of the code change `patch_id`:
    ///
    /// ```ignore
    /// if ctx.patched("charge-in-cents")? { new_code().await } else { old_code().await }
    /// ```
    ///
    /// True for a run that gets here under this code (a marker is recorded, one step position,
    /// travelling with the next request), and for every replay of such a run; false for a run
    /// whose history was made here by code without the change — it replays the old branch, and
    /// the position stays for the old branch's next call. Once no run begun before the change
    /// is left, the old branch can go (the call must stay while histories with the marker can
    /// still be replayed).
    pub fn patched(&self, patch_id: &str) -> Result<bool, WorkflowError> {
        let inner = &self.inner;
        match inner.history.patched(patch_id)? {
            Patched::Old => Ok(false),
            Patched::Replayed(_) => Ok(true),
            Patched::Record(step_id) => {
                inner.live(step_id)?;
                inner.check_cancelled()?;
                let marker = shapes::Patch {
                    patch_id: patch_id.to_string(),
                };
                inner.defer(step_id, names::PATCH, shape_payload(&marker), 1, None);
                Ok(true)
            }
        }
    }
}
