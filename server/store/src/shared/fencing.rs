//! Fencing: a worker's write lands only while its workflow is PENDING at the epoch the write
//! carries (see [`crate::Fence`]). Every fenced write but the batched hot path (step records and
//! completions, which fence inside their one statement) starts here, in its transaction.
//!
//! On PostgreSQL the fence read locks the workflow row `FOR SHARE` until commit, so a concurrent
//! claim or recovery (which raises the epoch) waits for the write or makes it see the new epoch;
//! writes of one workflow's steps do not block each other. On SQLite the one writer connection
//! does the same by running one transaction at a time.

use crate::dialect::{sql, Dialect, Exec};
use crate::rows::{self, db_error, step_columns, workflow_columns, StepRow, WorkflowRow};
use crate::*;

/// A connection of dialect `B`'s driver.
pub(crate) type Conn<B> = <<B as Dialect>::Db as sqlx::Database>::Connection;

/// The workflow as stored, read on `exec`.
pub(crate) async fn workflow_on<'e, B: Dialect>(
    exec: impl Exec<'e, B>,
    workflow_id: &str,
) -> StoreResult<Option<WorkflowRecord>> {
    let row: Option<WorkflowRow> = B::query_as(concat!(
        "SELECT ",
        workflow_columns!(),
        " FROM workflows WHERE workflow_id = $1"
    ))
    .bind(workflow_id)
    .fetch_optional(exec)
    .await
    .map_err(db_error)?;
    row.map(WorkflowRecord::try_from).transpose()
}

/// The step recorded at `step_id` of a workflow, read on `conn`.
pub(crate) async fn recorded_step<B: Dialect>(
    conn: &mut Conn<B>,
    workflow_id: &str,
    step_id: u32,
) -> StoreResult<Option<StepRecord>> {
    let row: Option<StepRow> = B::query_as(concat!(
        "SELECT ",
        step_columns!(),
        " FROM steps WHERE workflow_id = $1 AND step_id = $2"
    ))
    .bind(workflow_id)
    .bind(step_id as i64)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    row.map(StepRecord::try_from).transpose()
}

/// Checks the fence, holding the workflow row until commit, and returns the step already
/// recorded at `step_id`, if any (a replay). Refused with `StaleEpoch`, `NotRunning` or
/// `WorkflowNotFound` otherwise.
pub(crate) async fn fenced_step<B: Dialect>(
    conn: &mut Conn<B>,
    fence: &Fence,
    step_id: u32,
) -> StoreResult<Option<StepRecord>> {
    let shared = sql!(B:
        "SELECT ",
        workflow_columns!(),
        " FROM workflows WHERE workflow_id = $1",
        B::FOR_SHARE
    );
    fence_with::<B>(conn, shared, fence, step_id).await
}

/// Like [`fenced_step`], and two such fences of one workflow take turns: for a write that
/// reads what the last one wrote (a stream append computing `MAX + 1`).
pub(crate) async fn fenced_step_alone<B: Dialect>(
    conn: &mut Conn<B>,
    fence: &Fence,
    step_id: u32,
) -> StoreResult<Option<StepRecord>> {
    let alone = sql!(B:
        "SELECT ",
        workflow_columns!(),
        " FROM workflows WHERE workflow_id = $1",
        B::FOR_NO_KEY_UPDATE
    );
    fence_with::<B>(conn, alone, fence, step_id).await
}

async fn fence_with<B: Dialect>(
    conn: &mut Conn<B>,
    read: &'static str,
    fence: &Fence,
    step_id: u32,
) -> StoreResult<Option<StepRecord>> {
    let row: Option<WorkflowRow> = B::query_as(read)
        .bind(&fence.workflow_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)?;
    let current = row.map(WorkflowRecord::try_from).transpose()?;
    match &current {
        Some(w) if w.status == WorkflowStatus::Pending && w.epoch == fence.epoch => {}
        _ => return Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
    }
    recorded_step::<B>(conn, &fence.workflow_id, step_id).await
}

/// Records a built-in step (an output, one attempt) of the fenced workflow, after
/// [`fenced_step`] in the same transaction. False when a concurrent request for the same step
/// got there first.
pub(crate) async fn insert_step<B: Dialect>(
    conn: &mut Conn<B>,
    fence: &Fence,
    step_id: u32,
    name: &str,
    output: &str,
    now: Millis,
) -> StoreResult<bool> {
    let done = B::query(
        "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at) \
         VALUES ($1, $2, $3, $4, NULL, 1, $5, $6) ON CONFLICT (workflow_id, step_id) DO NOTHING",
    )
    .bind(&fence.workflow_id)
    .bind(step_id as i64)
    .bind(name)
    .bind(output)
    .bind(fence.epoch as i64)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected() == 1)
}
