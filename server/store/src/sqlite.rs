//! The embedded store: one SQLite file in WAL mode.
//!
//! SQLite lets one writer in at a time, so writes go through a pool of exactly one connection:
//! they queue in the process instead of failing with SQLITE_BUSY, and a transaction on it sees
//! everything before it. Reads use their own small pool and never wait for writers (WAL).
//! `synchronous = FULL`: a step acknowledged to a worker survives a power cut, not just a crash.

use std::{str::FromStr, time::Duration};

use async_trait::async_trait;
use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    SqlitePool,
};

mod children;
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

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

pub struct SqliteStore {
    write: SqlitePool,
    read: SqlitePool,
    /// Group commit for step checkpoints: concurrent ones share one transaction, so one fsync.
    steps: Batcher<(Fence, NewStep, Millis), StoreResult<Recorded>>,
    /// Senders of the change channels handed out; kept so the channels stay open.
    silent: std::sync::Mutex<Vec<tokio::sync::mpsc::UnboundedSender<crate::changes::Change>>>,
}

/// Largest batch of step checkpoints in one transaction.
const MAX_STEP_BATCH: usize = 256;

/// Records a batch of steps in one transaction on the single writer connection. Each step is
/// checked on its own (fence, existing step) and gets its own answer; a refused step does not
/// affect the others, only a database failure fails the batch.
async fn record_steps(
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
    let current = SqliteStore::workflow_on(&mut **tx, &fence.workflow_id).await?;
    match &current {
        Some(w) if w.status == WorkflowStatus::Pending && w.epoch == fence.epoch => {}
        _ => return Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
    }
    let existing: Option<StepRow> = sqlx::query_as(concat!(
        "SELECT ",
        step_columns!(),
        " FROM steps WHERE workflow_id = ?1 AND step_id = ?2"
    ))
    .bind(&fence.workflow_id)
    .bind(step.step_id as i64)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db_error)?;
    if let Some(existing) = existing {
        return rows::check_existing_step(&fence.workflow_id, &StepRecord::try_from(existing)?, &step);
    }
    let (output, failure) = rows::outcome_columns(&step.outcome);
    sqlx::query(
        "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .bind(&fence.workflow_id)
    .bind(step.step_id as i64)
    .bind(&step.name)
    .bind(output)
    .bind(failure)
    .bind(step.attempts as i64)
    .bind(fence.epoch as i64)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(Recorded::New)
}

/// Inserts a workflow as a start does, inside the caller's transaction, or finds the one already
/// under its id (of another workflow name: `WorkflowIdConflict`) or holding its dedup id.
/// Schedules start this way, with the same insert as every start.
pub(crate) async fn insert_workflow(
    tx: &mut sqlx::SqliteConnection,
    new: &NewWorkflow,
    now: Millis,
) -> StoreResult<Started> {
    SqliteStore::start_in(tx, new, now).await
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `url` (`sqlite:path` or `sqlite://path`) and
    /// applies the embedded migrations.
    pub async fn open(url: &str) -> StoreResult<SqliteStore> {
        let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
        if let Some(dir) = std::path::Path::new(path.split('?').next().unwrap_or(path)).parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StoreError::Unavailable(format!("cannot create {dir:?}: {e}")))?;
            }
        }
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{path}"))
            .map_err(db_error)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(true);
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await
            .map_err(db_error)?;
        MIGRATOR
            .run(&write)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let read = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.read_only(true))
            .await
            .map_err(db_error)?;
        // One lane: SQLite has one writer anyway; batches form while the previous one commits.
        let writer = write.clone();
        let steps = Batcher::spawn(1, MAX_STEP_BATCH, move |batch| record_steps(writer.clone(), batch));
        Ok(SqliteStore {
            write,
            read,
            steps,
            silent: Default::default(),
        })
    }

    async fn workflow_on<'e, E>(exec: E, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>>
    where
        E: sqlx::Executor<'e, Database = sqlx::Sqlite>,
    {
        let row: Option<WorkflowRow> = sqlx::query_as(concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE workflow_id = ?1"
        ))
        .bind(workflow_id)
        .fetch_optional(exec)
        .await
        .map_err(db_error)?;
        row.map(WorkflowRecord::try_from).transpose()
    }
}

/// JSON array text, for `IN (SELECT value FROM json_each(?))`.
fn json_list<T: AsRef<str>>(items: &[T]) -> String {
    serde_json::to_string(&items.iter().map(|s| s.as_ref()).collect::<Vec<_>>()).expect("strings serialize")
}

/// Marks the given workflows back in their queue or dead-lettered; shared by both recovery paths.
const RECOVER_SET: &str = "recovery_attempts = recovery_attempts + 1, \
    status = CASE WHEN recovery_attempts + 1 > ?1 THEN 'MAX_RECOVERY_ATTEMPTS_EXCEEDED' ELSE 'ENQUEUED' END, \
    updated_at = ?2";

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn start_workflow(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        self.start_workflow_impl(new, now).await
    }

    async fn get_workflow(&self, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>> {
        Self::workflow_on(&self.read, workflow_id).await
    }

    async fn list_workflows(&self, q: &ListQuery) -> StoreResult<Vec<WorkflowRecord>> {
        let statuses =
            (!q.statuses.is_empty()).then(|| json_list(&q.statuses.iter().map(|s| s.as_str()).collect::<Vec<_>>()));
        let rows: Vec<WorkflowRow> = sqlx::query_as(concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE (?1 IS NULL OR status IN (SELECT value FROM json_each(?1))) \
              AND (?2 IS NULL OR workflow_name = ?2) AND (?3 IS NULL OR queue_name = ?3) \
              AND (?4 IS NULL OR created_at >= ?4) AND (?5 IS NULL OR created_at < ?5) \
              AND (?6 IS NULL OR created_at < ?6 OR (created_at = ?6 AND workflow_id < ?7)) \
              ORDER BY created_at DESC, workflow_id DESC LIMIT ?8"
        ))
        .bind(statuses)
        .bind(&q.workflow_name)
        .bind(&q.queue_name)
        .bind(q.created_at_or_after)
        .bind(q.created_before)
        .bind(q.after.as_ref().map(|a| a.0))
        .bind(q.after.as_ref().map(|a| a.1.clone()))
        .bind(q.limit as i64)
        .fetch_all(&self.read)
        .await
        .map_err(db_error)?;
        rows::workflows(rows)
    }

    async fn list_steps(&self, workflow_id: &str) -> StoreResult<Vec<StepRecord>> {
        let rows: Vec<StepRow> = sqlx::query_as(concat!(
            "SELECT ",
            step_columns!(),
            " FROM steps WHERE workflow_id = ?1 ORDER BY step_id"
        ))
        .bind(workflow_id)
        .fetch_all(&self.read)
        .await
        .map_err(db_error)?;
        if rows.is_empty() && Self::workflow_on(&self.read, workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        rows::steps(rows)
    }

    async fn claim_workflows(&self, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        if claim.limit == 0 || claim.workflow_names.is_empty() || claim.queues.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.write.begin().await.map_err(db_error)?;
        // Queues with limits are left to `claim_limited` (judged by their stored row).
        let claimed: Vec<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = 'PENDING', worker_id = ?1, session_id = ?7, epoch = epoch + 1, \
               app_version = COALESCE(app_version, ?2), updated_at = ?3, started_at = COALESCE(started_at, ?3) \
             WHERE workflow_id IN (SELECT workflow_id FROM workflows WHERE status = 'ENQUEUED' \
               AND queue_name IN (SELECT value FROM json_each(?4)) \
               AND queue_name NOT IN (SELECT queue_name FROM queues WHERE ",
            has_limits!(),
            ") AND workflow_name IN (SELECT value FROM json_each(?5)) \
               AND (app_version IS NULL OR app_version = ?2) \
               ORDER BY priority, created_at, workflow_id LIMIT ?6) \
             RETURNING ",
            workflow_columns!()
        ))
        .bind(&claim.worker_id)
        .bind(&claim.app_version)
        .bind(now)
        .bind(json_list(&claim.queues))
        .bind(json_list(&claim.workflow_names))
        .bind(claim.limit as i64)
        .bind(&claim.session_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        let claimed = Self::with_replay_steps(&mut tx, claimed).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(claimed)
    }

    async fn claim_limited(&self, queue: &str, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        self.claim_limited_impl(queue, claim, now).await
    }

    async fn set_start_time(&self, workflow_id: &str, run_at: Millis, now: Millis) -> StoreResult<WorkflowRecord> {
        self.set_start_time_impl(workflow_id, run_at, now).await
    }

    async fn record_step(&self, fence: &Fence, step: NewStep, now: Millis) -> StoreResult<Recorded> {
        self.steps.submit((fence.clone(), step, now)).await?
    }

    async fn complete_workflow(&self, fence: &Fence, outcome: Outcome, now: Millis) -> StoreResult<Completed> {
        let (output, failure) = rows::outcome_columns(&outcome);
        let status = match outcome {
            Outcome::Output(_) => WorkflowStatus::Success,
            Outcome::Failure(_) => WorkflowStatus::Error,
        };
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let written: Option<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = ?1, output = ?2, failure = ?3, updated_at = ?4 \
             WHERE workflow_id = ?5 AND status = 'PENDING' AND epoch = ?6 RETURNING ",
            workflow_columns!()
        ))
        .bind(status.as_str())
        .bind(output)
        .bind(failure)
        .bind(now)
        .bind(&fence.workflow_id)
        .bind(fence.epoch as i64)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let result = match written {
            Some(row) => Ok(Completed {
                workflow: row.try_into()?,
                adopted: false,
            }),
            None => match Self::workflow_on(&mut *tx, &fence.workflow_id).await? {
                Some(w) if w.status.is_terminal() => Ok(Completed {
                    workflow: w,
                    adopted: true,
                }),
                current => Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
            },
        };
        tx.commit().await.map_err(db_error)?;
        result
    }

    async fn cancel_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        sqlx::query(
            "UPDATE workflows SET status = 'CANCELLED', updated_at = ?1 WHERE workflow_id = ?2 \
             AND status IN ('ENQUEUED', 'DELAYED', 'PENDING')",
        )
        .bind(now)
        .bind(workflow_id)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let w = Self::workflow_on(&mut *tx, workflow_id).await?;
        tx.commit().await.map_err(db_error)?;
        w.ok_or_else(|| StoreError::WorkflowNotFound(workflow_id.to_string()))
    }

    async fn resume_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let resumed: Option<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = 'ENQUEUED', recovery_attempts = 0, updated_at = ?1 \
             WHERE workflow_id = ?2 AND status IN ('CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED') RETURNING ",
            workflow_columns!()
        ))
        .bind(now)
        .bind(workflow_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let result = match resumed {
            Some(row) => row.try_into(),
            None => match Self::workflow_on(&mut *tx, workflow_id).await? {
                None => Err(StoreError::WorkflowNotFound(workflow_id.to_string())),
                Some(w) => Err(StoreError::NotResumable {
                    workflow_id: workflow_id.to_string(),
                    status: w.status,
                }),
            },
        };
        tx.commit().await.map_err(db_error)?;
        result
    }

    async fn renew_session_lease(
        &self,
        session_id: &str,
        worker_id: &str,
        until: Millis,
        now: Millis,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO worker_sessions (session_id, worker_id, lease_expires_at, updated_at) VALUES (?1, ?4, ?2, ?3) \
             ON CONFLICT (session_id) DO UPDATE SET lease_expires_at = excluded.lease_expires_at, updated_at = excluded.updated_at",
        )
        .bind(session_id)
        .bind(until)
        .bind(now)
        .bind(worker_id)
        .execute(&self.write)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn release_worker(&self, worker_id: &str, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        let sql = format!("UPDATE workflows SET {RECOVER_SET} WHERE status = 'PENDING' AND worker_id = ?3 RETURNING workflow_id, status");
        let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(max_recovery_attempts as i64)
            .bind(now)
            .bind(worker_id)
            .fetch_all(&self.write)
            .await
            .map_err(db_error)?;
        Ok(rows::recovery(rows))
    }

    async fn release_lost(&self, lost: &[Fence], max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        // Rare (a worker lost a run), so one statement per workflow in one transaction is plenty.
        let sql = format!(
            "UPDATE workflows SET {RECOVER_SET} WHERE workflow_id = ?3 AND epoch = ?4 AND status = 'PENDING' \
             RETURNING workflow_id, status"
        );
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let mut rows: Vec<(String, String)> = Vec::new();
        for f in lost {
            let row: Option<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql.clone()))
                .bind(max_recovery_attempts as i64)
                .bind(now)
                .bind(&f.workflow_id)
                .bind(f.epoch as i64)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
            rows.extend(row);
        }
        tx.commit().await.map_err(db_error)?;
        Ok(rows::recovery(rows))
    }

    async fn recover_expired(&self, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        let sql = format!(
            "UPDATE workflows SET {RECOVER_SET} WHERE status = 'PENDING' AND NOT EXISTS \
             (SELECT 1 FROM worker_sessions w WHERE w.session_id = workflows.session_id AND w.lease_expires_at >= ?2) \
             RETURNING workflow_id, status"
        );
        let rows: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(max_recovery_attempts as i64)
            .bind(now)
            .fetch_all(&self.write)
            .await
            .map_err(db_error)?;
        Ok(rows::recovery(rows))
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
        // One process owns the file: every change happens through this replica, so there is
        // nothing to announce, and nothing to poll for. The channel stays open and silent.
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.silent.lock().unwrap().push(tx);
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
            "UPDATE workflows SET status = 'CANCELLED', updated_at = ?1 WHERE deadline_at IS NOT NULL AND deadline_at < ?1 \
             AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') RETURNING ",
            workflow_columns!()
        ))
        .bind(now)
        .fetch_all(&self.write)
        .await
        .map_err(db_error)?;
        rows::workflows(rows)
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
             SELECT value, ?2, ?2 FROM json_each(?1) WHERE true \
             ON CONFLICT (workflow_name) DO UPDATE SET last_seen_at = excluded.last_seen_at",
        )
        .bind(serde_json::to_string(names).expect("strings serialize"))
        .bind(now)
        .execute(&self.write)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn is_workflow_name_known(&self, name: &str) -> StoreResult<bool> {
        let found: Option<i64> = sqlx::query_scalar("SELECT 1 FROM workflow_names WHERE workflow_name = ?1")
            .bind(name)
            .fetch_optional(&self.read)
            .await
            .map_err(db_error)?;
        Ok(found.is_some())
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.read).await.map_err(db_error)?;
        Ok(())
    }

    async fn prune_sessions(&self, before: Millis) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM worker_sessions WHERE lease_expires_at < ?1 AND NOT EXISTS \
             (SELECT 1 FROM workflows WHERE workflows.session_id = worker_sessions.session_id AND status = 'PENDING')",
        )
        .bind(before)
        .execute(&self.write)
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
