//! The hot path on PostgreSQL: step checkpoints and completions group-committed, each batch
//! one statement that fences every row it writes (see `insert_steps_fenced`). Only when a write
//! did not go in do we read to explain why.

use sqlx::PgPool;

use super::PostgresStore;
use crate::dialect::{Backend, GroupCommit};
use crate::rows::{self, db_error, workflow_columns, WorkflowRow};
use crate::shared::fencing::recorded_step;
use crate::*;

/// Steps and completion in one statement (see `complete_in_one`).
pub(super) const COMPLETE: &str = concat!(
    "WITH fence AS (SELECT workflow_id FROM workflows WHERE workflow_id = $5 AND ",
    "(status = 'PENDING') IS TRUE",
    " AND epoch = $6 FOR SHARE), \
     ins AS (INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at, started_at) \
       SELECT fence.workflow_id, v.step_id, v.name, v.output, v.failure, v.attempts, $6, $4, v.started_at \
       FROM fence, unnest($7::bigint[], $8::text[], $9::text[], $10::text[], $11::bigint[], $13::bigint[]) \
         AS v(step_id, name, output, failure, attempts, started_at) \
       ON CONFLICT (workflow_id, step_id) DO NOTHING RETURNING 1) \
     UPDATE workflows SET status = $1, output = $2, failure = $3, updated_at = $4 \
     WHERE workflow_id = $5 AND ",
    "(status = 'PENDING') IS TRUE",
    " AND epoch = $6 AND (SELECT count(*) FROM ins) = $12 RETURNING ",
    workflow_columns!()
);

impl GroupCommit for PostgresStore {
    /// One statement, one commit: insert every step and complete, only if the workflow is
    /// PENDING at this epoch (held `FOR SHARE` for the statement, as the step batch does) and
    /// every step went in. `None` when nothing was written.
    async fn complete_in_one(
        &self,
        fence: &Fence,
        steps: &[NewStep],
        outcome: &Outcome,
        now: Millis,
    ) -> StoreResult<Option<Completed>> {
        let (output, failure) = rows::outcome_columns(outcome);
        let status = outcome.status();
        let finished = crate::changes::Change::Finished {
            workflow_id: fence.workflow_id.clone(),
        };
        let mut step_ids = Vec::with_capacity(steps.len());
        let (mut names, mut outputs, mut failures, mut attempts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut started = Vec::with_capacity(steps.len());
        for st in steps {
            let (o, f) = rows::outcome_columns(&st.outcome);
            step_ids.push(st.step_id as i64);
            names.push(st.name.clone());
            outputs.push(o);
            failures.push(f);
            attempts.push(st.attempts as i64);
            started.push(st.started_at);
        }
        let written: Option<WorkflowRow> = sqlx::query_as(COMPLETE)
            .bind(status.as_str())
            .bind(output)
            .bind(failure)
            .bind(now)
            .bind(&fence.workflow_id)
            .bind(fence.epoch as i64)
            .bind(&step_ids)
            .bind(&names)
            .bind(&outputs)
            .bind(&failures)
            .bind(&attempts)
            .bind(steps.len() as i64)
            .bind(&started)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)?;
        let Some(row) = written else {
            return Ok(None);
        };
        self.announce_soon(finished);
        Ok(Some(Completed {
            workflow: row.try_into()?,
            adopted: false,
        }))
    }

    async fn record(&self, fence: &Fence, step: NewStep, now: Millis) -> StoreResult<Recorded> {
        if self.insert_step_fenced(fence, &step, now).await? {
            return Ok(Recorded::New);
        }
        // Nothing written: either the fence failed or the step is already there. Steps are
        // never removed while their workflow runs, and epochs only grow, so these reads explain
        // the failed insert without a transaction.
        let current = crate::shared::fencing::workflow_on::<PostgresStore>(&self.pool, &fence.workflow_id).await?;
        match &current {
            Some(w) if w.status == WorkflowStatus::Pending && w.epoch == fence.epoch => {}
            _ => return Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
        }
        let mut conn = self.pool.acquire().await.map_err(db_error)?;
        match recorded_step::<PostgresStore>(&mut conn, &fence.workflow_id, step.step_id).await? {
            Some(existing) => rows::check_existing_step(&fence.workflow_id, &existing, &step),
            None => Err(StoreError::Unavailable(format!(
                "step {} of workflow {:?} was neither written nor found",
                step.step_id, fence.workflow_id
            ))),
        }
    }

    /// Finishes the workflow if it is PENDING at the fence's epoch: status-gated and fenced in
    /// the UPDATE itself, and group-committed with concurrent completions. `None` when refused.
    async fn finish_fenced(&self, fence: &Fence, outcome: Outcome, now: Millis) -> StoreResult<Option<WorkflowRow>> {
        self.completions.submit((fence.clone(), outcome, now)).await
    }
}

impl PostgresStore {
    /// The fast path of `record_step`: one statement that inserts the step only if the workflow
    /// is PENDING at this epoch. `FOR SHARE` locks the workflow row for the statement, so a
    /// concurrent claim or recovery either waits for us or makes the WHERE clause fail on
    /// re-check. Returns whether a row was written.
    async fn insert_step_fenced(&self, fence: &Fence, step: &NewStep, now: Millis) -> StoreResult<bool> {
        self.steps
            .submit(StepWrite {
                workflow_id: fence.workflow_id.clone(),
                epoch: fence.epoch,
                step: step.clone(),
                now,
            })
            .await
    }
}

/// One fenced step insert waiting for its batch.
pub(super) struct StepWrite {
    workflow_id: String,
    epoch: u64,
    step: NewStep,
    now: Millis,
}

/// A batch of fenced step inserts in one statement (see `insert_steps_fenced`).
pub(super) const INSERT_STEPS: &str = concat!(
    "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at, started_at) \
     SELECT v.workflow_id, v.step_id, v.name, v.output, v.failure, v.attempts, v.epoch, v.recorded_at, v.started_at \
     FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], \
                 $9::bigint[]) \
       AS v(workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at, started_at) \
     JOIN workflows w ON w.workflow_id = v.workflow_id AND ",
    "(w.status = 'PENDING') IS TRUE",
    " AND w.epoch = v.epoch FOR SHARE OF w \
     ON CONFLICT (workflow_id, step_id) DO NOTHING \
     RETURNING workflow_id, step_id",
);

/// Writes a batch of fenced step inserts with one statement (one round trip, one commit) and
/// says, per request, whether its row went in. A row goes in only if its workflow is PENDING at
/// the request's epoch; `FOR SHARE OF w` holds those workflow rows until the commit, so a
/// concurrent recovery or re-dispatch either waits for the batch or makes it re-check and skip
/// the row. A request whose row did not go in takes the slow path in `record_step`, which
/// explains why (stale epoch, not running, already recorded, conflict).
pub(super) async fn insert_steps_fenced(pool: PgPool, batch: Vec<StepWrite>) -> StoreResult<Vec<bool>> {
    let n = batch.len();
    let mut ids = Vec::with_capacity(n);
    let mut step_ids = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    let mut outputs = Vec::with_capacity(n);
    let mut failures = Vec::with_capacity(n);
    let mut attempts = Vec::with_capacity(n);
    let mut epochs = Vec::with_capacity(n);
    let mut times = Vec::with_capacity(n);
    let mut started = Vec::with_capacity(n);
    for w in &batch {
        let (output, failure) = rows::outcome_columns(&w.step.outcome);
        ids.push(w.workflow_id.clone());
        step_ids.push(w.step.step_id as i64);
        names.push(w.step.name.clone());
        outputs.push(output);
        failures.push(failure);
        attempts.push(w.step.attempts as i64);
        epochs.push(w.epoch as i64);
        times.push(w.now);
        started.push(w.step.started_at);
    }
    let inserted: Vec<(String, i64)> = sqlx::query_as(INSERT_STEPS)
        .bind(&ids)
        .bind(&step_ids)
        .bind(&names)
        .bind(&outputs)
        .bind(&failures)
        .bind(&attempts)
        .bind(&epochs)
        .bind(&times)
        .bind(&started)
        .fetch_all(&pool)
        .await
        .map_err(db_error)?;
    // Two requests for the same step in one batch: only the first counts as the one written;
    // the other learns on the slow path whether it matches.
    let mut fresh: std::collections::HashSet<(String, i64)> = inserted.into_iter().collect();
    Ok(batch
        .iter()
        .map(|w| fresh.remove(&(w.workflow_id.clone(), w.step.step_id as i64)))
        .collect())
}
