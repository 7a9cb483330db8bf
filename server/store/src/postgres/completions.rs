//! Group commit for workflow completions without steps to record (the common end of a
//! workflow whose last steps were already checkpointed, and of trivial workflows): concurrent
//! completions are written by one fenced UPDATE, so a burst costs one commit, not one each.

use sqlx::PgPool;

use crate::rows::{db_error, outcome_columns, workflow_columns, WorkflowRow};
use crate::*;

/// One completion: the fence it carries, its outcome, and when.
pub(super) type Completion = (Fence, Outcome, Millis);

/// Lanes writing batches at once, and the most completions in one statement.
pub(super) const LANES: usize = 4;
pub(super) const MAX_BATCH: usize = 512;

/// A batch of completions in one fenced UPDATE. The batch's columns get names of their own, so
/// the RETURNING list stays unambiguous.
pub(super) const COMPLETE_BATCH: &str = concat!(
    "WITH v AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[]) \
       AS v(v_id, v_epoch, v_status, v_output, v_failure, v_at)) \
     UPDATE workflows SET status = v_status, output = v_output, failure = v_failure, updated_at = v_at \
     FROM v WHERE workflow_id = v_id AND ",
    "(status = 'PENDING') IS TRUE",
    " AND epoch = v_epoch RETURNING ",
    workflow_columns!()
);

/// Writes each completion whose workflow is still PENDING at its epoch; answers with the
/// written row, or `None` for one refused by its fence or already finished (the caller then
/// works out why, one by one). Two completions of one workflow in a batch: one is written.
pub(super) async fn write(pool: PgPool, batch: Vec<Completion>) -> StoreResult<Vec<Option<WorkflowRow>>> {
    let n = batch.len();
    let (mut ids, mut epochs, mut statuses, mut outputs, mut failures, mut times) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (fence, outcome, now) in &batch {
        let (output, failure) = outcome_columns(outcome);
        ids.push(fence.workflow_id.clone());
        epochs.push(fence.epoch as i64);
        statuses.push(outcome.status().as_str());
        outputs.push(output);
        failures.push(failure);
        times.push(*now);
    }
    let written: Vec<WorkflowRow> = sqlx::query_as(COMPLETE_BATCH)
        .bind(&ids)
        .bind(&epochs)
        .bind(&statuses)
        .bind(&outputs)
        .bind(&failures)
        .bind(&times)
        .fetch_all(&pool)
        .await
        .map_err(db_error)?;
    let mut by_id: std::collections::HashMap<String, WorkflowRow> =
        written.into_iter().map(|w| (w.workflow_id.clone(), w)).collect();
    Ok(batch
        .iter()
        .map(|(fence, _, _)| by_id.remove(&fence.workflow_id))
        .collect())
}
