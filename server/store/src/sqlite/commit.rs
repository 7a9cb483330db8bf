//! The hot path on SQLite: step checkpoints group-committed (concurrent ones share one
//! transaction, so one fsync), and completions, with the steps that come with them in the same
//! transaction; each checked on the one writer connection.

use sqlx::SqlitePool;

use super::SqliteStore;
use crate::dialect::GroupCommit;
use crate::rows::{self, db_error, workflow_columns, WorkflowRow};
use crate::shared::fencing::recorded_step;
use crate::*;

/// Records a batch of steps in one transaction on the single writer connection. Each step is
/// checked on its own (fence, existing step) and gets its own answer; a refused step does not
/// affect the others, only a database failure fails the batch.
pub(super) async fn record_steps(
    write: SqlitePool,
    batch: Vec<(Fence, NewStep, Millis)>,
) -> StoreResult<Vec<StoreResult<Recorded>>> {
    let mut tx = write.begin().await.map_err(db_error)?;
    let mut results = Vec::with_capacity(batch.len());
    for (fence, step, now) in batch {
        results.push(record_step_in(&mut tx, &fence, step, now).await);
    }
    if results.iter().any(|r| matches!(r, Err(StoreError::Unavailable(_)))) {
        return Err(StoreError::Unavailable(
            "a step write failed; the batch was rolled back".into(),
        ));
    }
    tx.commit().await.map_err(db_error)?;
    Ok(results)
}

async fn record_step_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    fence: &Fence,
    step: NewStep,
    now: Millis,
) -> StoreResult<Recorded> {
    let current = crate::shared::fencing::workflow_on::<SqliteStore>(&mut **tx, &fence.workflow_id).await?;
    match &current {
        Some(w) if w.status == WorkflowStatus::Pending && w.epoch == fence.epoch => {}
        _ => return Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
    }
    if let Some(existing) = recorded_step::<SqliteStore>(tx, &fence.workflow_id, step.step_id).await? {
        return rows::check_existing_step(&fence.workflow_id, &existing, &step);
    }
    let (output, failure) = rows::outcome_columns(&step.outcome);
    sqlx::query(
        "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at, started_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&fence.workflow_id)
    .bind(step.step_id as i64)
    .bind(&step.name)
    .bind(output)
    .bind(failure)
    .bind(step.attempts as i64)
    .bind(fence.epoch as i64)
    .bind(now)
    .bind(step.started_at)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(Recorded::New)
}

/// Finishes the workflow if it is PENDING at the fence's epoch, status-gated and fenced in one
/// statement.
async fn finish_row<'e, E: sqlx::Executor<'e, Database = sqlx::Sqlite>>(
    exec: E,
    fence: &Fence,
    outcome: &Outcome,
    now: Millis,
) -> StoreResult<Option<WorkflowRow>> {
    let (output, failure) = rows::outcome_columns(outcome);
    sqlx::query_as(concat!(
        "UPDATE workflows SET status = $1, output = $2, failure = $3, updated_at = $4 \
         WHERE workflow_id = $5 AND status = 'PENDING' AND epoch = $6 RETURNING ",
        workflow_columns!()
    ))
    .bind(outcome.status().as_str())
    .bind(output)
    .bind(failure)
    .bind(now)
    .bind(&fence.workflow_id)
    .bind(fence.epoch as i64)
    .fetch_optional(exec)
    .await
    .map_err(db_error)
}

impl GroupCommit for SqliteStore {
    async fn record(&self, fence: &Fence, step: NewStep, now: Millis) -> StoreResult<Recorded> {
        self.steps.submit((fence.clone(), step, now)).await?
    }

    /// Finishes the workflow if it is PENDING at the fence's epoch. `None` when refused.
    async fn finish_fenced(&self, fence: &Fence, outcome: Outcome, now: Millis) -> StoreResult<Option<WorkflowRow>> {
        finish_row(&self.write, fence, &outcome, now).await
    }

    /// Records every step and finishes, in one transaction (one fsync). `None`, writing
    /// nothing, when any of it is refused: the caller then goes one by one to explain why.
    async fn complete_in_one(
        &self,
        fence: &Fence,
        steps: &[NewStep],
        outcome: &Outcome,
        now: Millis,
    ) -> StoreResult<Option<Completed>> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        for step in steps {
            match record_step_in(&mut tx, fence, step.clone(), now).await {
                Ok(_) => {}
                Err(e @ StoreError::Unavailable(_)) => return Err(e),
                Err(_) => return Ok(None),
            }
        }
        let Some(row) = finish_row(&mut *tx, fence, outcome, now).await? else {
            return Ok(None);
        };
        tx.commit().await.map_err(db_error)?;
        Ok(Some(Completed {
            workflow: row.try_into()?,
            adopted: false,
        }))
    }
}
