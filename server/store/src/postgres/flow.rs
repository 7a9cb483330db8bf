//! Flow control on PostgreSQL: starts (dedup ids, delays, debounce, direct dispatch) and the
//! claim of a queue with limits.
//!
//! A limited claim locks the queue's row first, in a statement of its own, so every claimer of
//! that queue — on any replica — takes its turn, and the counts read by the next statement (a
//! fresh snapshot under read committed) include everything the previous holder admitted.

use super::PostgresStore;
use crate::admission::{self, Load};
use crate::queues::{has_limits, queue_columns, QueueRow};
use crate::rows::{self, db_error, step_columns, workflow_columns, StepRow, WorkflowRow};
use crate::*;

/// Most partitions looked at by one claim; the rest wait for a later one.
const MAX_PARTITIONS: i64 = 1024;

/// Inserts `new` on `conn`, or finds what stopped it: the workflow already under its id (the
/// same start again, or `WorkflowIdConflict`), or the unfinished holder of its dedup id
/// (`Duplicate`, or the holder when asked). `None`: neither — the holder finished between the
/// insert and the read; the caller may try again.
pub(super) async fn try_start(
    conn: &mut sqlx::PgConnection,
    new: &NewWorkflow,
    now: Millis,
) -> StoreResult<Option<Started>> {
    if let Some(row) = PostgresStore::insert_workflow(&mut *conn, new, now).await? {
        return Ok(Some(Started {
            workflow: row.try_into()?,
            created: true,
        }));
    }
    // ON CONFLICT waited for any concurrent insert of these keys to commit, so the row is
    // visible to this next statement (read committed takes a fresh snapshot).
    let row: Option<WorkflowRow> = sqlx::query_as(concat!(
        "SELECT ",
        workflow_columns!(),
        " FROM workflows WHERE workflow_id = $1 OR (queue_name = $2 AND dedup_id = $3 \
           AND status IN ('ENQUEUED', 'PENDING', 'DELAYED')) ORDER BY workflow_id = $1 DESC LIMIT 1"
    ))
    .bind(&new.workflow_id)
    .bind(&new.queue_name)
    .bind(&new.dedup_id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    match row {
        Some(r) if r.workflow_id == new.workflow_id => rows::existing_start(new, r.try_into()?).map(Some),
        Some(holder) => rows::duplicate_start(new, holder.try_into()?).map(Some),
        None => Ok(None),
    }
}

impl PostgresStore {
    /// Inserts `new` unless a unique key (its id, its live dedup id, its debounce key) is taken.
    /// A direct dispatch applies only on a queue without limits and without a delay.
    pub(super) async fn insert_workflow<'e, E: sqlx::Executor<'e, Database = sqlx::Postgres>>(
        exec: E,
        new: &NewWorkflow,
        now: Millis,
    ) -> StoreResult<Option<WorkflowRow>> {
        let a = new.assign.as_ref();
        sqlx::query_as(concat!(
            "WITH a AS (SELECT CASE WHEN $7::text IS NOT NULL AND $13::bigint IS NULL AND NOT EXISTS \
               (SELECT 1 FROM queues WHERE queue_name = $3 AND ",
            has_limits!(),
            ") THEN $7::text END AS worker) \
             INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, created_at, \
               updated_at, epoch, worker_id, session_id, parent_workflow_id, deadline_at, priority, partition_key, \
               dedup_id, wake_at, started_at, debounce_key, debounce_until) \
             SELECT $1, $2, CASE WHEN $13::bigint IS NOT NULL THEN 'DELAYED' WHEN a.worker IS NULL THEN 'ENQUEUED' \
               ELSE 'PENDING' END, $3, COALESCE($4, CASE WHEN a.worker IS NOT NULL THEN $9 END), $5, $6, $6, \
               CASE WHEN a.worker IS NULL THEN 0 ELSE 1 END, a.worker, CASE WHEN a.worker IS NOT NULL THEN $8 END, \
               $10, $11, $12, $14, $15, $13, CASE WHEN a.worker IS NOT NULL THEN $6 END, $16, $17 FROM a \
             ON CONFLICT DO NOTHING RETURNING ",
            workflow_columns!()
        ))
        .bind(&new.workflow_id)
        .bind(&new.workflow_name)
        .bind(&new.queue_name)
        .bind(&new.app_version)
        .bind(&new.input)
        .bind(now)
        .bind(a.map(|a| &a.worker_id))
        .bind(a.map(|a| &a.session_id))
        .bind(a.map(|a| &a.app_version).filter(|v| !v.is_empty()))
        .bind(&new.parent_workflow_id)
        .bind(new.deadline_at)
        .bind(new.priority as i64)
        .bind(new.run_at)
        .bind(&new.partition_key)
        .bind(&new.dedup_id)
        .bind(new.debounce.as_ref().map(|d| &d.key))
        .bind(new.debounce.as_ref().map(|d| d.until))
        .fetch_optional(exec)
        .await
        .map_err(db_error)
    }

    pub(super) async fn start(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        if new.debounce.is_some() {
            return self.start_debounced(new, now).await;
        }
        // A conflict on the dedup id with a workflow that finishes before we read it leaves
        // nothing to report: insert again.
        for _ in 0..3 {
            let mut conn = self.pool.acquire().await.map_err(db_error)?;
            if let Some(started) = try_start(&mut conn, &new, now).await? {
                if started.created && started.workflow.status == WorkflowStatus::Enqueued {
                    self.announce_soon(crate::changes::Change::Enqueued);
                }
                return Ok(started);
            }
        }
        Err(StoreError::Unavailable(
            "the start kept conflicting with workflows that finished meanwhile".into(),
        ))
    }

    /// Collapses onto the not-yet-started workflow with the same name and debounce key, or
    /// inserts one. The row lock taken here keeps the wake pass from starting it mid-update.
    async fn start_debounced(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        let d = new.debounce.clone().expect("debounced start");
        for _ in 0..3 {
            let mut tx = self.pool.begin().await.map_err(db_error)?;
            let updated: Option<WorkflowRow> = sqlx::query_as(concat!(
                "UPDATE workflows SET input = $3, wake_at = LEAST($4, debounce_until), updated_at = $5 \
                 WHERE workflow_id = (SELECT workflow_id FROM workflows WHERE workflow_name = $1 AND debounce_key = $2 \
                   AND status = 'DELAYED' AND epoch = 0 FOR UPDATE) \
                 AND status = 'DELAYED' AND epoch = 0 RETURNING ",
                workflow_columns!()
            ))
            .bind(&new.workflow_name)
            .bind(&d.key)
            .bind(&new.input)
            .bind(new.run_at)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
            if let Some(row) = updated {
                tx.commit().await.map_err(db_error)?;
                return Ok(Started {
                    workflow: row.try_into()?,
                    created: false,
                });
            }
            let inserted = Self::insert_workflow(&mut *tx, &new, now).await?;
            tx.commit().await.map_err(db_error)?;
            if let Some(row) = inserted {
                return Ok(Started {
                    workflow: row.try_into()?,
                    created: true,
                });
            }
            if let Some(existing) = self.workflow(&new.workflow_id).await? {
                return rows::existing_start(&new, existing);
            }
            // Another start with this key inserted first: collapse onto it.
        }
        Err(StoreError::Unavailable(
            "the debounced start kept racing with others".into(),
        ))
    }

    pub(super) async fn move_start(
        &self,
        workflow_id: &str,
        run_at: Millis,
        now: Millis,
    ) -> StoreResult<WorkflowRecord> {
        let row: Option<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET wake_at = $2, updated_at = $3 \
             WHERE workflow_id = $1 AND status = 'DELAYED' AND epoch = 0 RETURNING ",
            workflow_columns!()
        ))
        .bind(workflow_id)
        .bind(run_at)
        .bind(now)
        .fetch_optional(&self.pool)
        .await
        .map_err(db_error)?;
        match row {
            Some(r) => r.try_into(),
            None => match self.workflow(workflow_id).await? {
                None => Err(StoreError::WorkflowNotFound(workflow_id.to_string())),
                Some(w) => Err(StoreError::NotDelayed {
                    workflow_id: workflow_id.to_string(),
                    status: w.status,
                }),
            },
        }
    }

    pub(super) async fn claim_from_limited(
        &self,
        queue: &str,
        claim: &Claim,
        now: Millis,
    ) -> StoreResult<Vec<ClaimedWorkflow>> {
        if claim.limit == 0 || claim.workflow_names.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        // Nothing waiting (by this snapshot): no need to queue for the lock.
        let q: Option<QueueRow> = sqlx::query_as(concat!(
            "SELECT ",
            queue_columns!(),
            " FROM queues WHERE queue_name = $1 AND EXISTS (SELECT 1 FROM workflows \
               WHERE status = 'ENQUEUED' AND queue_name = $1) FOR UPDATE"
        ))
        .bind(queue)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let Some(q) = q else {
            return Ok(Vec::new());
        };
        let limits = QueueRecord::from(q).limits;
        let window_start = limits.rate_limit.map_or(Millis::MAX, |r| now - r.period_ms);
        let (running, running_here, started_in_window): (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT COUNT(*) FROM workflows WHERE queue_name = $1 AND status = 'PENDING'), \
                    (SELECT COUNT(*) FROM workflows WHERE queue_name = $1 AND status = 'PENDING' AND worker_id = $2), \
                    (SELECT COUNT(*) FROM workflows WHERE queue_name = $1 AND started_at > $3)",
        )
        .bind(queue)
        .bind(&claim.worker_id)
        .bind(window_start)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        let mut load = Load {
            running: running as u64,
            running_here: running_here as u64,
            started_in_window: started_in_window as u64,
            running_by_partition: Default::default(),
        };
        let room = admission::room(&limits, &load, claim.limit);
        if room == 0 {
            return Ok(Vec::new());
        }
        let candidates: Vec<(String, String, bool)> = if limits.partition_concurrency.is_some() {
            let by_partition: Vec<(String, i64)> = sqlx::query_as(
                "SELECT partition_key, COUNT(*) FROM workflows WHERE queue_name = $1 AND status = 'PENDING' \
                 GROUP BY partition_key",
            )
            .bind(queue)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            load.running_by_partition = by_partition.into_iter().map(|(k, n)| (k, n as u64)).collect();
            let keys = self.partitions(&mut tx, queue).await?;
            let (keys, rooms): (Vec<String>, Vec<i64>) = keys
                .into_iter()
                .map(|k| {
                    let n = admission::partition_room(&limits, &load, &k).min(room) as i64;
                    (k, n)
                })
                .filter(|(_, n)| *n > 0)
                .unzip();
            sqlx::query_as(
                "SELECT w.workflow_id, w.partition_key, w.started_at IS NOT NULL \
                 FROM unnest($2::text[], $3::bigint[]) AS p(k, n) CROSS JOIN LATERAL \
                   (SELECT workflow_id, partition_key, started_at, priority, created_at FROM workflows \
                    WHERE status = 'ENQUEUED' AND queue_name = $1 AND partition_key = p.k \
                      AND workflow_name = ANY($4) AND (app_version IS NULL OR app_version = $5) \
                    ORDER BY priority, created_at, workflow_id LIMIT p.n FOR UPDATE SKIP LOCKED) w",
            )
            .bind(queue)
            .bind(&keys)
            .bind(&rooms)
            .bind(&claim.workflow_names)
            .bind(&claim.app_version)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?
        } else {
            sqlx::query_as(
                "SELECT workflow_id, partition_key, started_at IS NOT NULL FROM workflows \
                 WHERE status = 'ENQUEUED' AND queue_name = $1 AND workflow_name = ANY($2) \
                   AND (app_version IS NULL OR app_version = $3) \
                 ORDER BY priority, created_at, workflow_id LIMIT $4 FOR UPDATE SKIP LOCKED",
            )
            .bind(queue)
            .bind(&claim.workflow_names)
            .bind(&claim.app_version)
            .bind(room as i64)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?
        };
        let chosen = admission::admit(
            &limits,
            &load,
            admission::group(candidates),
            room,
            admission::next_turn(),
        );
        if chosen.is_empty() {
            return Ok(Vec::new());
        }
        let claimed: Vec<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = 'PENDING', worker_id = $2, session_id = $3, epoch = epoch + 1, \
               app_version = COALESCE(app_version, $4), updated_at = $5, started_at = COALESCE(started_at, $5) \
             WHERE workflow_id = ANY($1) AND status = 'ENQUEUED' RETURNING ",
            workflow_columns!()
        ))
        .bind(&chosen)
        .bind(&claim.worker_id)
        .bind(&claim.session_id)
        .bind(&claim.app_version)
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        self.with_replay_steps(claimed).await
    }

    /// The partition keys with workflows waiting, by skipping through the partition index
    /// (one probe per key, however deep each partition's backlog).
    async fn partitions(&self, tx: &mut sqlx::PgConnection, queue: &str) -> StoreResult<Vec<String>> {
        let keys: Vec<(String,)> = sqlx::query_as(
            "WITH RECURSIVE p(k) AS ( \
               SELECT MIN(partition_key) FROM workflows WHERE status = 'ENQUEUED' AND queue_name = $1 \
               UNION ALL \
               SELECT (SELECT MIN(partition_key) FROM workflows WHERE status = 'ENQUEUED' AND queue_name = $1 \
                 AND partition_key > p.k) FROM p WHERE p.k IS NOT NULL) \
             SELECT k FROM p WHERE k IS NOT NULL LIMIT $2",
        )
        .bind(queue)
        .bind(MAX_PARTITIONS)
        .fetch_all(tx)
        .await
        .map_err(db_error)?;
        Ok(keys.into_iter().map(|(k,)| k).collect())
    }

    /// Claimed rows with their checkpoints, oldest first. A first dispatch (epoch 1) has no
    /// steps; re-dispatched workflows' steps are read after the claim committed, when no older
    /// epoch can write any more (record_step is fenced), so the read is complete.
    pub(super) async fn with_replay_steps(&self, mut claimed: Vec<WorkflowRow>) -> StoreResult<Vec<ClaimedWorkflow>> {
        if claimed.is_empty() {
            return Ok(Vec::new());
        }
        // RETURNING has no order; the contract says oldest first.
        claimed.sort_by(|a, b| {
            (a.priority, a.created_at, &a.workflow_id).cmp(&(b.priority, b.created_at, &b.workflow_id))
        });
        let replays: Vec<&str> = claimed
            .iter()
            .filter(|w| w.epoch > 1)
            .map(|w| w.workflow_id.as_str())
            .collect();
        let step_rows: Vec<StepRow> = if replays.is_empty() {
            Vec::new()
        } else {
            sqlx::query_as(concat!(
                "SELECT ",
                step_columns!(),
                " FROM steps WHERE workflow_id = ANY($1) ORDER BY workflow_id, step_id"
            ))
            .bind(&replays)
            .fetch_all(&self.pool)
            .await
            .map_err(db_error)?
        };
        rows::group_steps(rows::workflows(claimed)?, step_rows)
    }
}
