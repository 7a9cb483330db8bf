//! The end of a workflow's records: deleting finished workflows and everything recorded for
//! them, so a database does not grow for ever.

use async_trait::async_trait;

use crate::*;

/// Most workflows one delete removes. A cascade over a larger tree is refused: delete its
/// subtrees first (or let retention collect them), so one call never holds a transaction over
/// an unbounded number of rows.
pub const MAX_DELETE: usize = 10_000;

/// Which finished workflows a retention rule covers: those on one of `queues` (empty: any)
/// that ended in one of `statuses` (empty: any finished status).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Covered {
    pub queues: Vec<String>,
    pub statuses: Vec<WorkflowStatus>,
}

/// One batch of the retention collector: up to `limit` of the finished workflows `covered`
/// (and not `except`ed, which earlier rules own) that finished before `finished_before`.
#[derive(Debug, Clone)]
pub struct Collect {
    pub covered: Covered,
    pub except: Vec<Covered>,
    pub finished_before: Millis,
    pub limit: u32,
}

/// A fork to make (see [`Lifecycle::fork_workflow`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fork {
    pub source: String,
    /// Copy the source's steps before this position; `None`: all of them.
    pub from_step: Option<u32>,
    pub new_workflow_id: String,
    /// Pin the fork to this version; `None`: the source's.
    pub app_version: Option<String>,
    /// Its queue; `None`: the source's.
    pub queue_name: Option<String>,
}

#[async_trait]
pub trait Lifecycle: Send + Sync {
    /// Deletes `workflow_id` — with `cascade`, its children and theirs too — and everything
    /// recorded for each (steps, messages sent to it, events and their history, stream values,
    /// remote-step attempts), in one transaction; returns the ids deleted.
    ///
    /// Only finished workflows (SUCCESS, ERROR, CANCELLED, dead-lettered) are deleted:
    /// [`StoreError::NotFinished`] names one that is not (cancel it first), and
    /// [`StoreError::ParentNotFinished`] refuses a child whose parent is still going (the
    /// parent may yet await it). A tree over [`MAX_DELETE`] is [`StoreError::TooManyToDelete`].
    /// One that does not exist is [`StoreError::WorkflowNotFound`]. A descendant resumed while
    /// the delete runs is left alone: rows are deleted only while finished.
    async fn delete_workflow(&self, workflow_id: &str, cascade: bool) -> StoreResult<Vec<String>>;

    /// Deletes one batch of what `batch` covers, oldest finished first, with everything
    /// recorded for each, in one transaction; returns the ids. A child whose parent has not
    /// finished is left (the parent may still await it). `None` when another replica is
    /// collecting in this database right now: the caller skips its turn.
    async fn collect_finished(&self, batch: &Collect) -> StoreResult<Option<Vec<String>>>;

    /// Starts `fork.new_workflow_id` ENQUEUED as a copy of `fork.source` (name, input, queue
    /// and version unless the fork names others) with the source's recorded steps before
    /// `from_step`, the events it had set by then (their history, and each key's last value
    /// as the current one) and the stream values it had written by the last copied step, in
    /// one transaction; its lineage is recorded. The same fork again returns the first one;
    /// an id used by anything else is [`StoreError::WorkflowIdConflict`].
    async fn fork_workflow(&self, fork: &Fork, now: Millis) -> StoreResult<WorkflowRecord>;

    /// Pins the unfinished `workflow_id` to `app_version`: its next claim is by workers of
    /// that version (a PENDING one keeps its current dispatch). A finished one is
    /// [`StoreError::Finished`]; one that does not exist, [`StoreError::WorkflowNotFound`].
    async fn set_app_version(&self, workflow_id: &str, app_version: &str, now: Millis) -> StoreResult<WorkflowRecord>;

    /// Ends the fenced run by continuing as new, in one transaction: the run's history (steps,
    /// remote-step calls, events' history, consumed messages) moves to a new finished row
    /// `<id>/run-<n>` (CONTINUED_AS_NEW, `continued_as` naming the workflow), and the workflow
    /// goes back to its queue under its id with `input`, an empty history, `run` + 1 and the
    /// epoch raised. The same request again returns the first answer (`adopted`); a stale fence
    /// is refused like any fenced write.
    async fn continue_as_new(&self, fence: &Fence, input: &str, now: Millis) -> StoreResult<ContinuedAsNew>;
}

/// What continuing as new did.
#[derive(Debug, Clone)]
pub struct ContinuedAsNew {
    /// The workflow, ENQUEUED for its next run.
    pub workflow: WorkflowRecord,
    /// The id of the ended run's row.
    pub ended_run: String,
    /// True when this was a repeat of a request already applied.
    pub adopted: bool,
}
