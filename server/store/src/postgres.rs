//! The production store: PostgreSQL, shared by any number of server replicas.
//!
//! Nothing here is serialized in the process: every method is one or a few statements whose
//! row locks make them safe against other replicas doing the same thing at the same time.
//! - Claims and recovery pick rows with `FOR UPDATE SKIP LOCKED`, so concurrent callers split
//!   the work instead of queueing behind each other.
//! - Fenced writes (`record_step`, `complete_workflow`) are single autocommit statements that
//!   check status and epoch in their WHERE clause; PostgreSQL re-evaluates that clause on the
//!   newest row version when it had to wait for a lock, so a write can never slip in next to an
//!   epoch bump. Only when that statement did nothing do we read to explain why.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::{postgres::PgPoolOptions, PgPool};

mod announcer;
mod children;
mod completions;
mod events;
mod flow;
mod messages;
mod parking;
mod queues;
mod remote_steps;
mod schedules;
mod streams;

use crate::batch::Batcher;
use crate::queues::has_limits;
use crate::rows::{self, db_error, step_columns, workflow_columns, StepRow, WorkflowRow};
use crate::*;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// Connections per store unless told otherwise: enough for the dispatcher, the step hot path
/// and the client API at once, small enough that several replicas fit in a default server.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 32;

pub struct PostgresStore {
    pool: PgPool,
    /// Announce changes to other replicas with NOTIFY (see [`crate::changes`]).
    notify: bool,
    /// Group commit for step checkpoints, the hot path.
    steps: Batcher<StepWrite, bool>,
    /// Group commit for completions with no steps to record.
    completions: Batcher<completions::Completion, Option<WorkflowRow>>,
    /// Sends committed changes to the other replicas, batched (see `announcer.rs`).
    announcer: announcer::Announcer,
}

/// Step-writing lanes: batches in flight at once. More lanes than one keep the database busy
/// while a batch commits; a few suffice because each batch holds everything that queued.
const STEP_LANES: usize = 4;
/// Largest batch of step writes in one statement.
const MAX_STEP_BATCH: usize = 512;

impl PostgresStore {
    /// What a recovery statement returned (workflow, new status), with the requeued ones
    /// announced to the other replicas.
    fn recovered(&self, rows: Vec<(String, String)>) -> Recovery {
        let recovery = rows::recovery(rows);
        if !recovery.requeued.is_empty() {
            self.announce_soon(crate::changes::Change::Enqueued);
        }
        recovery
    }

    /// Connects to `url` (`postgres://user@host:port/db`) and applies the embedded migrations.
    pub async fn open(url: &str) -> StoreResult<PostgresStore> {
        Self::open_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// Like [`PostgresStore::open`], with at most `max_connections` connections in the pool.
    pub async fn open_with(url: &str, max_connections: u32) -> StoreResult<PostgresStore> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            // A saturated pool should surface as Unavailable, not hang a request forever.
            .acquire_timeout(Duration::from_secs(30))
            // No ping before each use: it is a round trip on every store call, most of a hot
            // path's latency. A connection that broke while idle fails its next statement
            // instead (Unavailable, which callers retry) and is replaced; connections are also
            // retired after a while so none lives on past a database restart or failover.
            .test_before_acquire(false)
            .max_lifetime(Duration::from_secs(30 * 60))
            .connect(url)
            .await
            .map_err(db_error)?;
        // sqlx holds an advisory lock while migrating, so replicas starting together are safe.
        MIGRATOR
            .run(&pool)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let writer = pool.clone();
        let steps = Batcher::spawn(STEP_LANES, MAX_STEP_BATCH, move |batch| {
            insert_steps_fenced(writer.clone(), batch)
        });
        let writer = pool.clone();
        let completions = Batcher::spawn(completions::LANES, completions::MAX_BATCH, move |batch| {
            completions::write(writer.clone(), batch)
        });
        Ok(PostgresStore {
            completions,
            announcer: announcer::Announcer::spawn(pool.clone()),
            pool,
            notify: true,
            steps,
        })
    }

    /// Switches NOTIFY off, for PostgreSQL-compatible databases without it: replicas then
    /// learn of each other's changes by polling.
    pub fn with_notify(mut self, notify: bool) -> Self {
        self.notify = notify;
        self
    }

    /// NOTIFYs the other replicas of a change already committed, off the caller's path and
    /// batched with others (see `announcer.rs`). Not inside the write's transaction on purpose:
    /// PostgreSQL serializes the commits of transactions that NOTIFY, which on hot paths
    /// (completions, starts) would undo group commit. Lost, it is found by the others' polling.
    pub(crate) fn announce_soon(&self, change: crate::changes::Change) {
        if self.notify {
            self.announcer.announce(change);
        }
    }

    /// NOTIFYs the other replicas, inside the caller's transaction when given one (delivered on
    /// commit).
    pub(crate) async fn announce<'e, E: sqlx::Executor<'e, Database = sqlx::Postgres>>(
        &self,
        exec: E,
        change: crate::changes::Change,
    ) -> StoreResult<()> {
        if self.notify {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(crate::changes::CHANNEL)
                .bind(change.encode())
                .execute(exec)
                .await
                .map_err(db_error)?;
        }
        Ok(())
    }

    async fn workflow(&self, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>> {
        let row: Option<WorkflowRow> = sqlx::query_as(concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE workflow_id = $1"
        ))
        .bind(workflow_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        row.map(WorkflowRecord::try_from).transpose()
    }

    async fn step(&self, workflow_id: &str, step_id: u32) -> StoreResult<Option<StepRecord>> {
        let row: Option<StepRow> = sqlx::query_as(concat!(
            "SELECT ",
            step_columns!(),
            " FROM steps WHERE workflow_id = $1 AND step_id = $2"
        ))
        .bind(workflow_id)
        .bind(step_id as i64)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        row.map(StepRecord::try_from).transpose()
    }

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

impl PostgresStore {
    /// One statement, one commit: insert every step and complete, only if the workflow is
    /// PENDING at this epoch (held `FOR SHARE` for the statement, as the step batch does) and
    /// every step went in. `None` when nothing was written.
    async fn complete_with_steps_at_once(
        &self,
        fence: &Fence,
        steps: &[NewStep],
        outcome: &Outcome,
        now: Millis,
    ) -> StoreResult<Option<Completed>> {
        let (output, failure) = rows::outcome_columns(outcome);
        let status = match outcome {
            Outcome::Output(_) => WorkflowStatus::Success,
            Outcome::Failure(_) => WorkflowStatus::Error,
        };
        let finished = crate::changes::Change::Finished {
            workflow_id: fence.workflow_id.clone(),
        };
        let mut step_ids = Vec::with_capacity(steps.len());
        let (mut names, mut outputs, mut failures, mut attempts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for st in steps {
            let (o, f) = rows::outcome_columns(&st.outcome);
            step_ids.push(st.step_id as i64);
            names.push(st.name.clone());
            outputs.push(o);
            failures.push(f);
            attempts.push(st.attempts as i64);
        }
        let written: Option<WorkflowRow> = sqlx::query_as(concat!(
            "WITH fence AS (SELECT workflow_id FROM workflows WHERE workflow_id = $5 AND status = 'PENDING' \
               AND epoch = $6 FOR SHARE), \
             ins AS (INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at) \
               SELECT fence.workflow_id, v.step_id, v.name, v.output, v.failure, v.attempts, $6, $4 \
               FROM fence, unnest($7::bigint[], $8::text[], $9::text[], $10::text[], $11::bigint[]) \
                 AS v(step_id, name, output, failure, attempts) \
               ON CONFLICT (workflow_id, step_id) DO NOTHING RETURNING 1) \
             UPDATE workflows SET status = $1, output = $2, failure = $3, updated_at = $4 \
             WHERE workflow_id = $5 AND status = 'PENDING' AND epoch = $6 AND (SELECT count(*) FROM ins) = $12 \
             RETURNING ",
            workflow_columns!()
        ))
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
}

/// One fenced step insert waiting for its batch.
struct StepWrite {
    workflow_id: String,
    epoch: u64,
    step: NewStep,
    now: Millis,
}

/// Writes a batch of fenced step inserts with one statement (one round trip, one commit) and
/// says, per request, whether its row went in. A row goes in only if its workflow is PENDING at
/// the request's epoch; `FOR SHARE OF w` holds those workflow rows until the commit, so a
/// concurrent recovery or re-dispatch either waits for the batch or makes it re-check and skip
/// the row. A request whose row did not go in takes the slow path in `record_step`, which
/// explains why (stale epoch, not running, already recorded, conflict).
async fn insert_steps_fenced(pool: PgPool, batch: Vec<StepWrite>) -> StoreResult<Vec<bool>> {
    let n = batch.len();
    let mut ids = Vec::with_capacity(n);
    let mut step_ids = Vec::with_capacity(n);
    let mut names = Vec::with_capacity(n);
    let mut outputs = Vec::with_capacity(n);
    let mut failures = Vec::with_capacity(n);
    let mut attempts = Vec::with_capacity(n);
    let mut epochs = Vec::with_capacity(n);
    let mut times = Vec::with_capacity(n);
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
    }
    let inserted: Vec<(String, i64)> = sqlx::query_as(
        "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at) \
         SELECT v.workflow_id, v.step_id, v.name, v.output, v.failure, v.attempts, v.epoch, v.recorded_at \
         FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[]) \
           AS v(workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at) \
         JOIN workflows w ON w.workflow_id = v.workflow_id AND w.status = 'PENDING' AND w.epoch = v.epoch \
         FOR SHARE OF w \
         ON CONFLICT (workflow_id, step_id) DO NOTHING \
         RETURNING workflow_id, step_id",
    )
    .bind(&ids)
    .bind(&step_ids)
    .bind(&names)
    .bind(&outputs)
    .bind(&failures)
    .bind(&attempts)
    .bind(&epochs)
    .bind(&times)
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

/// Same as SQLite's: counts a recovery and requeues or dead-letters. `$1` is the limit, `$2` now.
const RECOVER_SET: &str = "recovery_attempts = recovery_attempts + 1, \
    status = CASE WHEN recovery_attempts + 1 > $1 THEN 'MAX_RECOVERY_ATTEMPTS_EXCEEDED' ELSE 'ENQUEUED' END, \
    updated_at = $2";

/// Inserts a workflow as a start does, inside the caller's transaction, or finds the one already
/// under its id (of another workflow name: `WorkflowIdConflict`) or holding its dedup id.
/// Schedules start this way, with the same insert as every start, so queues, limits, names and
/// app versions behave the same whoever starts. Announcing the new work is the caller's (after
/// its commit).
pub(crate) async fn insert_workflow(
    conn: &mut sqlx::PgConnection,
    new: &NewWorkflow,
    now: Millis,
) -> StoreResult<Started> {
    flow::try_start(conn, new, now)
        .await?
        .ok_or_else(|| StoreError::Unavailable(format!("workflow {:?} was neither started nor found", new.workflow_id)))
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn start_workflow(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        self.start_workflow_impl(new, now).await
    }

    async fn get_workflow(&self, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>> {
        self.workflow(workflow_id).await
    }

    async fn list_workflows(&self, q: &ListQuery) -> StoreResult<Vec<WorkflowRecord>> {
        let statuses: Option<Vec<&str>> =
            (!q.statuses.is_empty()).then(|| q.statuses.iter().map(|s| s.as_str()).collect());
        // Typed casts let one prepared statement serve every combination of filters.
        let rows: Vec<WorkflowRow> = sqlx::query_as(concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE ($1::text[] IS NULL OR status = ANY($1)) \
              AND ($2::text IS NULL OR workflow_name = $2) AND ($3::text IS NULL OR queue_name = $3) \
              AND ($4::bigint IS NULL OR created_at >= $4) AND ($5::bigint IS NULL OR created_at < $5) \
              AND ($6::bigint IS NULL OR (created_at, workflow_id) < ($6, $7::text)) \
              ORDER BY created_at DESC, workflow_id DESC LIMIT $8"
        ))
        .bind(statuses)
        .bind(&q.workflow_name)
        .bind(&q.queue_name)
        .bind(q.created_at_or_after)
        .bind(q.created_before)
        .bind(q.after.as_ref().map(|a| a.0))
        .bind(q.after.as_ref().map(|a| a.1.as_str()))
        .bind(q.limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        rows::workflows(rows)
    }

    async fn list_steps(&self, workflow_id: &str) -> StoreResult<Vec<StepRecord>> {
        let rows: Vec<StepRow> = sqlx::query_as(concat!(
            "SELECT ",
            step_columns!(),
            " FROM steps WHERE workflow_id = $1 ORDER BY step_id"
        ))
        .bind(workflow_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        if rows.is_empty() && self.workflow(workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        rows::steps(rows)
    }

    async fn claim_workflows(&self, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        if claim.limit == 0 || claim.workflow_names.is_empty() || claim.queues.is_empty() {
            return Ok(Vec::new());
        }
        // One autocommit statement: the claim is atomic by itself, and a first dispatch (epoch 1)
        // has no steps to load, so the common case costs one round trip and one commit. Steps
        // of re-dispatched workflows are read after the claim committed; a late write from an
        // older epoch cannot land after that (record_step is fenced), so the read is complete.
        // `= ANY(ARRAY(subquery))` rather than `IN (subquery)`: the ARRAY form is an InitPlan,
        // run exactly once. With `IN`, the planner may pick a nested-loop semi-join that
        // re-scans the locking subquery per outer row, and with SKIP LOCKED each re-scan can
        // see a different set, claiming more than `limit`. The outer status check is a
        // belt-and-braces re-check on the locked row. Queues with limits are left to
        // `claim_limited` (judged by their stored row as this statement runs).
        let claimed: Vec<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = 'PENDING', worker_id = $1, session_id = $7, epoch = epoch + 1, \
               app_version = COALESCE(app_version, $2), updated_at = $3, started_at = COALESCE(started_at, $3) \
             WHERE workflow_id = ANY(ARRAY(SELECT workflow_id FROM workflows WHERE status = 'ENQUEUED' \
               AND queue_name = ANY($4) AND queue_name <> ALL(ARRAY(SELECT queue_name FROM queues \
                 WHERE queue_name = ANY($4) AND ",
            has_limits!(),
            ")) AND workflow_name = ANY($5) \
               AND (app_version IS NULL OR app_version = $2) \
               ORDER BY priority, created_at, workflow_id LIMIT $6 FOR UPDATE SKIP LOCKED)) \
             AND status = 'ENQUEUED' \
             RETURNING ",
            workflow_columns!()
        ))
        .bind(&claim.worker_id)
        .bind(&claim.app_version)
        .bind(now)
        .bind(&claim.queues)
        .bind(&claim.workflow_names)
        .bind(claim.limit as i64)
        .bind(&claim.session_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        self.with_replay_steps(claimed).await
    }

    async fn claim_limited(&self, queue: &str, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        self.claim_limited_impl(queue, claim, now).await
    }

    async fn set_start_time(&self, workflow_id: &str, run_at: Millis, now: Millis) -> StoreResult<WorkflowRecord> {
        self.set_start_time_impl(workflow_id, run_at, now).await
    }

    async fn record_step(&self, fence: &Fence, step: NewStep, now: Millis) -> StoreResult<Recorded> {
        if self.insert_step_fenced(fence, &step, now).await? {
            return Ok(Recorded::New);
        }
        // Nothing written: either the fence failed or the step is already there. Steps are
        // never removed while their workflow runs, and epochs only grow, so these reads explain
        // the failed insert without a transaction.
        let current = self.workflow(&fence.workflow_id).await?;
        match &current {
            Some(w) if w.status == WorkflowStatus::Pending && w.epoch == fence.epoch => {}
            _ => return Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
        }
        match self.step(&fence.workflow_id, step.step_id).await? {
            Some(existing) => rows::check_existing_step(&fence.workflow_id, &existing, &step),
            None => Err(StoreError::Unavailable(format!(
                "step {} of workflow {:?} was neither written nor found",
                step.step_id, fence.workflow_id
            ))),
        }
    }

    async fn complete_with_steps(
        &self,
        fence: &Fence,
        steps: Vec<NewStep>,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<Completed> {
        if steps.is_empty() {
            return self.complete_workflow(fence, outcome, now).await;
        }
        if let Some(done) = self.complete_with_steps_at_once(fence, &steps, &outcome, now).await? {
            return Ok(done);
        }
        // Not all went in at once (a retried completion, a conflict, a lost fence): one by one,
        // so each refusal is explained.
        crate::record_then_complete(self, fence, steps, outcome, now).await
    }

    async fn complete_workflow(&self, fence: &Fence, outcome: Outcome, now: Millis) -> StoreResult<Completed> {
        // Status-gated and fenced in the UPDATE itself; concurrent completions share one.
        let written = self.completions.submit((fence.clone(), outcome, now)).await?;
        if let Some(row) = written {
            self.announce_soon(crate::changes::Change::Finished {
                workflow_id: fence.workflow_id.clone(),
            });
            return Ok(Completed {
                workflow: row.try_into()?,
                adopted: false,
            });
        }
        // Terminal is terminal until an operator resumes, so the outcome read here is the one
        // that beat us.
        match self.workflow(&fence.workflow_id).await? {
            Some(w) if w.status.is_terminal() => Ok(Completed {
                workflow: w,
                adopted: true,
            }),
            current => Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
        }
    }

    async fn cancel_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord> {
        let cancelled: Option<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = 'CANCELLED', updated_at = $1 WHERE workflow_id = $2 \
             AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') RETURNING ",
            workflow_columns!()
        ))
        .bind(now)
        .bind(workflow_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        if cancelled.is_some() {
            let change = crate::changes::Change::Finished {
                workflow_id: workflow_id.to_string(),
            };
            self.announce_soon(change);
        }
        match cancelled {
            Some(row) => row.try_into(),
            None => self
                .workflow(workflow_id)
                .await?
                .ok_or_else(|| StoreError::WorkflowNotFound(workflow_id.to_string())),
        }
    }

    async fn resume_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord> {
        let resumed: Option<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = 'ENQUEUED', recovery_attempts = 0, updated_at = $1 \
             WHERE workflow_id = $2 AND status IN ('CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED') RETURNING ",
            workflow_columns!()
        ))
        .bind(now)
        .bind(workflow_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        if resumed.is_some() {
            self.announce_soon(crate::changes::Change::Enqueued);
        }
        match resumed {
            Some(row) => row.try_into(),
            None => match self.workflow(workflow_id).await? {
                None => Err(StoreError::WorkflowNotFound(workflow_id.to_string())),
                Some(w) => Err(StoreError::NotResumable {
                    workflow_id: workflow_id.to_string(),
                    status: w.status,
                }),
            },
        }
    }

    async fn renew_session_lease(
        &self,
        session_id: &str,
        worker_id: &str,
        until: Millis,
        now: Millis,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO worker_sessions (session_id, worker_id, lease_expires_at, updated_at) VALUES ($1, $4, $2, $3) \
             ON CONFLICT (session_id) DO UPDATE SET lease_expires_at = excluded.lease_expires_at, updated_at = excluded.updated_at",
        )
        .bind(session_id)
        .bind(until)
        .bind(now)
        .bind(worker_id)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn release_worker(&self, worker_id: &str, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        let sql = format!(
            "UPDATE workflows SET {RECOVER_SET} WHERE status = 'PENDING' AND worker_id = $3 \
             RETURNING workflow_id, status"
        );
        let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(max_recovery_attempts as i64)
            .bind(now)
            .bind(worker_id)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(self.recovered(rows))
    }

    async fn release_lost(&self, lost: &[Fence], max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        let ids: Vec<&str> = lost.iter().map(|f| f.workflow_id.as_str()).collect();
        let epochs: Vec<i64> = lost.iter().map(|f| f.epoch as i64).collect();
        let sql = format!(
            "UPDATE workflows SET {RECOVER_SET} FROM UNNEST($3::text[], $4::bigint[]) AS l(id, epoch) \
             WHERE workflows.workflow_id = l.id AND workflows.epoch = l.epoch AND status = 'PENDING' \
             RETURNING workflows.workflow_id, status"
        );
        let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(max_recovery_attempts as i64)
            .bind(now)
            .bind(&ids)
            .bind(&epochs)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(self.recovered(rows))
    }

    async fn recover_expired(&self, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        // Candidates are locked with SKIP LOCKED so replicas recovering at the same time split
        // the rows instead of waiting on each other (or on a worker's in-flight step write);
        // a skipped row is picked up by the next pass. ARRAY(...) runs the subquery once (see
        // claim_workflows) and the outer status check re-tests the locked row.
        let sql = format!(
            "UPDATE workflows SET {RECOVER_SET} \
             WHERE workflow_id = ANY(ARRAY(SELECT wf.workflow_id FROM workflows wf \
               WHERE wf.status = 'PENDING' AND NOT EXISTS \
                 (SELECT 1 FROM worker_sessions w WHERE w.session_id = wf.session_id AND w.lease_expires_at >= $2) \
               FOR UPDATE OF wf SKIP LOCKED)) \
             AND status = 'PENDING' \
             RETURNING workflow_id, status"
        );
        let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(max_recovery_attempts as i64)
            .bind(now)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(self.recovered(rows))
    }

    async fn send_message(&self, message: NewMessage, now: Millis) -> StoreResult<Sent> {
        self.send_message_impl(message, now).await
    }

    async fn send_message_delivering(
        &self,
        message: NewMessage,
        waiter: &RecvWaiter,
        now: Millis,
    ) -> StoreResult<(Sent, Option<String>)> {
        self.send_message_delivering_impl(message, waiter, now).await
    }

    async fn send_message_step(
        &self,
        fence: &Fence,
        step_id: u32,
        message: NewMessage,
        now: Millis,
    ) -> StoreResult<String> {
        self.send_message_step_impl(fence, step_id, message, now).await
    }

    async fn recv(
        &self,
        fence: &Fence,
        step_id: u32,
        topic: &str,
        deadline: Millis,
        now: Millis,
    ) -> StoreResult<Received> {
        self.recv_impl(fence, step_id, topic, deadline, now).await
    }

    async fn list_messages(&self, workflow_id: &str) -> StoreResult<Vec<MessageRecord>> {
        self.list_messages_impl(workflow_id).await
    }

    async fn pending_messages(&self, waits: &[(String, String)]) -> StoreResult<Vec<(String, String)>> {
        self.pending_messages_impl(waits).await
    }

    async fn set_event_step(
        &self,
        fence: &Fence,
        step_id: u32,
        key: &str,
        value: &str,
        now: Millis,
    ) -> StoreResult<()> {
        self.set_event_step_impl(fence, step_id, key, value, now).await
    }

    async fn get_event(&self, workflow_id: &str, key: &str) -> StoreResult<Option<String>> {
        self.get_event_impl(workflow_id, key).await
    }

    async fn get_event_step(
        &self,
        fence: &Fence,
        step_id: u32,
        target_workflow_id: &str,
        key: &str,
        deadline: Millis,
        now: Millis,
    ) -> StoreResult<Received> {
        self.get_event_step_impl(fence, step_id, target_workflow_id, key, deadline, now)
            .await
    }

    async fn list_events(&self, workflow_id: &str) -> StoreResult<Vec<EventRecord>> {
        self.list_events_impl(workflow_id).await
    }

    async fn events_set(&self, keys: &[(String, String)]) -> StoreResult<Vec<(String, String)>> {
        self.events_set_impl(keys).await
    }

    async fn write_stream_step(
        &self,
        fence: &Fence,
        step_id: u32,
        key: &str,
        value: Option<&str>,
        now: Millis,
    ) -> StoreResult<u64> {
        self.write_stream_step_impl(fence, step_id, key, value, now).await
    }

    async fn read_stream(&self, workflow_id: &str, key: &str, from: u64, limit: u32) -> StoreResult<Vec<StreamEntry>> {
        self.read_stream_impl(workflow_id, key, from, limit).await
    }

    async fn subscribe(&self) -> StoreResult<Option<tokio::sync::mpsc::UnboundedReceiver<crate::changes::Change>>> {
        if !self.notify {
            return Ok(None);
        }
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(db_error)?;
        listener.listen(crate::changes::CHANNEL).await.map_err(db_error)?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            loop {
                match listener.recv().await {
                    Ok(n) => {
                        for change in crate::changes::Change::decode_all(n.payload()) {
                            if tx.send(change).is_err() {
                                return;
                            }
                        }
                    }
                    // Reconnects on the next recv; what was missed meanwhile is found by polling.
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            }
        });
        Ok(Some(rx))
    }

    async fn start_child_step(
        &self,
        fence: &Fence,
        step_id: u32,
        child: NewWorkflow,
        now: Millis,
    ) -> StoreResult<String> {
        self.start_child_step_impl(fence, step_id, child, now).await
    }

    async fn await_child_step(
        &self,
        fence: &Fence,
        step_id: u32,
        child_id: &str,
        now: Millis,
    ) -> StoreResult<Option<ChildOutcome>> {
        self.await_child_step_impl(fence, step_id, child_id, now).await
    }

    async fn cancel_expired(&self, now: Millis) -> StoreResult<Vec<WorkflowRecord>> {
        let rows: Vec<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = 'CANCELLED', updated_at = $1 WHERE workflow_id = ANY(ARRAY( \
               SELECT workflow_id FROM workflows WHERE deadline_at IS NOT NULL AND deadline_at < $1 \
               AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') FOR UPDATE SKIP LOCKED)) \
             AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') RETURNING ",
            workflow_columns!()
        ))
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        let cancelled = rows::workflows(rows)?;
        for w in &cancelled {
            let change = crate::changes::Change::Finished {
                workflow_id: w.workflow_id.clone(),
            };
            self.announce_soon(change);
        }
        Ok(cancelled)
    }

    async fn park(
        &self,
        fence: &Fence,
        step_id: u32,
        wake_at: Millis,
        on: &ParkedOn,
        now: Millis,
    ) -> StoreResult<bool> {
        self.park_impl(fence, step_id, wake_at, on, now).await
    }

    async fn wake_due(&self, now: Millis) -> StoreResult<u64> {
        self.wake_due_impl(now).await
    }

    async fn children(&self, workflow_id: &str) -> StoreResult<Vec<String>> {
        self.children_impl(workflow_id).await
    }

    async fn finished_among(&self, workflow_ids: &[String]) -> StoreResult<Vec<String>> {
        self.finished_among_impl(workflow_ids).await
    }

    async fn register_workflow_names(&self, names: &[String], now: Millis) -> StoreResult<()> {
        if names.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO workflow_names (workflow_name, first_seen_at, last_seen_at) \
             SELECT n, $2, $2 FROM unnest($1::text[]) AS n \
             ON CONFLICT (workflow_name) DO UPDATE SET last_seen_at = excluded.last_seen_at",
        )
        .bind(names)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn is_workflow_name_known(&self, name: &str) -> StoreResult<bool> {
        let found: Option<i32> = sqlx::query_scalar("SELECT 1 FROM workflow_names WHERE workflow_name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db_error)?;
        Ok(found.is_some())
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await.map_err(db_error)?;
        Ok(())
    }

    async fn prune_sessions(&self, before: Millis) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM worker_sessions WHERE lease_expires_at < $1 AND NOT EXISTS \
             (SELECT 1 FROM workflows WHERE workflows.session_id = worker_sessions.session_id AND status = 'PENDING')",
        )
        .bind(before)
        .execute(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected())
    }

    async fn call_step(
        &self,
        fence: &Fence,
        step_id: u32,
        task: &NewStepTask,
        now: Millis,
    ) -> StoreResult<Option<StepRecord>> {
        self.call_step_impl(fence, step_id, task, now).await
    }

    async fn claim_step_tasks(&self, claim: &StepClaim, now: Millis) -> StoreResult<Vec<StepTask>> {
        self.claim_step_tasks_impl(claim, now).await
    }

    async fn finish_step_task(
        &self,
        attempt: &StepAttempt,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<StepFinished> {
        self.finish_step_task_impl(attempt, outcome, now).await
    }

    async fn expire_step_tasks(&self, now: Millis) -> StoreResult<ExpiredSteps> {
        self.expire_step_tasks_impl(now).await
    }

    async fn steps_recorded(&self, keys: &[(String, u32)]) -> StoreResult<Vec<(String, u32)>> {
        self.steps_recorded_impl(keys).await
    }

    async fn select_step(
        &self,
        fence: &Fence,
        step_id: u32,
        targets: &[WaitTarget],
        mode: WaitFor,
        now: Millis,
    ) -> StoreResult<Option<u32>> {
        self.select_step_impl(fence, step_id, targets, mode, now).await
    }

    async fn create_queue(&self, name: &str, limits: &QueueLimits, now: Millis) -> StoreResult<QueueRecord> {
        self.create_queue_impl(name, limits, now).await
    }

    async fn update_queue(&self, name: &str, update: &QueueUpdate, now: Millis) -> StoreResult<QueueRecord> {
        self.update_queue_impl(name, update, now).await
    }

    async fn get_queue(&self, name: &str) -> StoreResult<Option<QueueRecord>> {
        self.get_queue_impl(name).await
    }

    async fn list_queues(&self) -> StoreResult<Vec<QueueRecord>> {
        self.list_queues_impl().await
    }

    async fn delete_queue(&self, name: &str) -> StoreResult<bool> {
        self.delete_queue_impl(name).await
    }

    async fn ensure_queues(&self, names: &[String], now: Millis) -> StoreResult<()> {
        self.ensure_queues_impl(names, now).await
    }

    async fn create_schedule(&self, name: &str, state: &ScheduleState, now: Millis) -> StoreResult<ScheduleRecord> {
        self.create_schedule_impl(name, state, now).await
    }

    async fn update_schedule(
        &self,
        name: &str,
        version: u64,
        state: &ScheduleState,
        now: Millis,
    ) -> StoreResult<Option<ScheduleRecord>> {
        self.update_schedule_impl(name, version, state, now).await
    }

    async fn get_schedule(&self, name: &str) -> StoreResult<Option<ScheduleRecord>> {
        self.get_schedule_impl(name).await
    }

    async fn list_schedules(&self) -> StoreResult<Vec<ScheduleRecord>> {
        self.list_schedules_impl().await
    }

    async fn delete_schedule(&self, name: &str) -> StoreResult<bool> {
        self.delete_schedule_impl(name).await
    }

    async fn upcoming_schedules(&self, limit: u32) -> StoreResult<Vec<ScheduleRecord>> {
        self.upcoming_schedules_impl(limit).await
    }

    async fn fire_schedule(&self, fire: &ScheduleFire, now: Millis) -> StoreResult<Option<Started>> {
        self.fire_schedule_impl(fire, now).await
    }

    async fn start_scheduled(&self, name: &str, workflows: &[NewWorkflow], now: Millis) -> StoreResult<Vec<Started>> {
        self.start_scheduled_impl(name, workflows, now).await
    }
}
