//! Flow control on SQLite: starts (dedup ids, delays, debounce, direct dispatch) and the claim
//! of a queue with limits. Every write runs on the single writer connection, so a transaction
//! here sees and counts everything before it; no row locks are needed.

use super::{dialect, SqliteStore};
use crate::admission::{self, Load};
use crate::queues::{has_limits, queue_columns, QueueRow};
use crate::rows::{self, db_error, step_columns, workflow_columns, StepRow, WorkflowRow};
use crate::*;

/// Most partitions looked at by one claim; the rest wait for a later one.
const MAX_PARTITIONS: i64 = 1024;

impl SqliteStore {
    /// Inserts `new` unless a unique key (its id, its live dedup id, its debounce key) is taken.
    /// A direct dispatch applies only on a queue without limits and without a delay.
    async fn insert_workflow(tx: &mut sqlx::SqliteConnection, new: &NewWorkflow, now: Millis) -> StoreResult<bool> {
        let a = new.assign.as_ref();
        let done = sqlx::query(concat!(
            "WITH a AS (SELECT CASE WHEN ?7 IS NOT NULL AND ?13 IS NULL AND NOT EXISTS \
               (SELECT 1 FROM queues WHERE queue_name = ?3 AND ",
            has_limits!(),
            ") THEN ?7 END AS worker) \
             INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, created_at, \
               updated_at, epoch, worker_id, session_id, parent_workflow_id, deadline_at, priority, partition_key, \
               dedup_id, wake_at, started_at, debounce_key, debounce_until) \
             SELECT ?1, ?2, CASE WHEN ?13 IS NOT NULL THEN 'DELAYED' WHEN a.worker IS NULL THEN 'ENQUEUED' \
               ELSE 'PENDING' END, ?3, COALESCE(?4, CASE WHEN a.worker IS NOT NULL THEN ?9 END), ?5, ?6, ?6, \
               CASE WHEN a.worker IS NULL THEN 0 ELSE 1 END, a.worker, CASE WHEN a.worker IS NOT NULL THEN ?8 END, \
               ?10, ?11, ?12, ?14, ?15, ?13, CASE WHEN a.worker IS NOT NULL THEN ?6 END, ?16, ?17 FROM a WHERE true \
             ON CONFLICT DO NOTHING",
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
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    pub(super) async fn start(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let started = Self::start_in(&mut tx, &new, now).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(started)
    }

    pub(super) async fn start_in(
        tx: &mut sqlx::SqliteConnection,
        new: &NewWorkflow,
        now: Millis,
    ) -> StoreResult<Started> {
        if let Some(d) = &new.debounce {
            let updated: Option<WorkflowRow> = sqlx::query_as(concat!(
                "UPDATE workflows SET input = ?3, wake_at = MIN(?4, COALESCE(debounce_until, ?4)), updated_at = ?5 \
                 WHERE workflow_name = ?1 AND debounce_key = ?2 AND status = 'DELAYED' AND epoch = 0 RETURNING ",
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
                return Ok(Started {
                    workflow: row.try_into()?,
                    created: false,
                });
            }
        }
        let inserted = Self::insert_workflow(tx, new, now).await?;
        if let Some(existing) = Self::workflow_on(&mut *tx, &new.workflow_id).await? {
            if inserted {
                return Ok(Started {
                    workflow: existing,
                    created: true,
                });
            }
            return rows::existing_start(new, existing);
        }
        // Not inserted and the id is free: the dedup id is held (no other key can conflict).
        let holder: Option<WorkflowRow> = sqlx::query_as(concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE queue_name = ?1 AND dedup_id = ?2 AND status IN ('ENQUEUED', 'PENDING', 'DELAYED')"
        ))
        .bind(&new.queue_name)
        .bind(&new.dedup_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        match holder {
            Some(h) => rows::duplicate_start(new, h.try_into()?),
            None => Err(StoreError::Unavailable(format!(
                "workflow {:?} was neither started nor found",
                new.workflow_id
            ))),
        }
    }

    pub(super) async fn move_start(
        &self,
        workflow_id: &str,
        run_at: Millis,
        now: Millis,
    ) -> StoreResult<WorkflowRecord> {
        let row: Option<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET wake_at = ?2, updated_at = ?3 \
             WHERE workflow_id = ?1 AND status = 'DELAYED' AND epoch = 0 RETURNING ",
            workflow_columns!()
        ))
        .bind(workflow_id)
        .bind(run_at)
        .bind(now)
        .fetch_optional(&self.write)
        .await
        .map_err(db_error)?;
        match row {
            Some(r) => r.try_into(),
            None => match Self::workflow_on(&self.read, workflow_id).await? {
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
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let q: Option<QueueRow> = sqlx::query_as(concat!(
            "SELECT ",
            queue_columns!(),
            " FROM queues WHERE queue_name = ?1 AND EXISTS (SELECT 1 FROM workflows \
               WHERE status = 'ENQUEUED' AND queue_name = ?1)"
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
            "SELECT (SELECT COUNT(*) FROM workflows WHERE queue_name = ?1 AND status = 'PENDING'), \
                    (SELECT COUNT(*) FROM workflows WHERE queue_name = ?1 AND status = 'PENDING' AND worker_id = ?2), \
                    (SELECT COUNT(*) FROM workflows WHERE queue_name = ?1 AND started_at > ?3)",
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
        let names = dialect::list(&claim.workflow_names);
        let head = "SELECT workflow_id, partition_key, started_at IS NOT NULL FROM workflows \
                    WHERE status = 'ENQUEUED' AND queue_name = ?1 AND workflow_name IN (SELECT value FROM json_each(?2)) \
                      AND (app_version IS NULL OR app_version = ?3)";
        let mut candidates: Vec<(String, String, bool)> = Vec::new();
        if limits.partition_concurrency.is_some() {
            let by_partition: Vec<(String, i64)> = sqlx::query_as(
                "SELECT partition_key, COUNT(*) FROM workflows WHERE queue_name = ?1 AND status = 'PENDING' \
                 GROUP BY partition_key",
            )
            .bind(queue)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            load.running_by_partition = by_partition.into_iter().map(|(k, n)| (k, n as u64)).collect();
            // The partitions with work waiting, one index probe per key (a skip scan).
            let keys: Vec<(String,)> = sqlx::query_as(
                "WITH RECURSIVE p(k) AS ( \
                   SELECT MIN(partition_key) FROM workflows WHERE status = 'ENQUEUED' AND queue_name = ?1 \
                   UNION ALL \
                   SELECT (SELECT MIN(partition_key) FROM workflows WHERE status = 'ENQUEUED' AND queue_name = ?1 \
                     AND partition_key > p.k) FROM p WHERE p.k IS NOT NULL LIMIT ?2) \
                 SELECT k FROM p WHERE k IS NOT NULL",
            )
            .bind(queue)
            .bind(MAX_PARTITIONS)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            let sql = format!("{head} AND partition_key = ?4 ORDER BY priority, created_at, workflow_id LIMIT ?5");
            for (key,) in keys {
                let n = admission::partition_room(&limits, &load, &key).min(room);
                if n == 0 {
                    continue;
                }
                let rows: Vec<(String, String, bool)> = sqlx::query_as(sqlx::AssertSqlSafe(sql.as_str()))
                    .bind(queue)
                    .bind(&names)
                    .bind(&claim.app_version)
                    .bind(&key)
                    .bind(n as i64)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(db_error)?;
                candidates.extend(rows);
            }
        } else {
            let sql = format!("{head} ORDER BY priority, created_at, workflow_id LIMIT ?4");
            candidates = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(queue)
                .bind(&names)
                .bind(&claim.app_version)
                .bind(room as i64)
                .fetch_all(&mut *tx)
                .await
                .map_err(db_error)?;
        }
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
            "UPDATE workflows SET status = 'PENDING', worker_id = ?2, session_id = ?3, epoch = epoch + 1, \
               app_version = COALESCE(app_version, ?4), updated_at = ?5, started_at = COALESCE(started_at, ?5) \
             WHERE workflow_id IN (SELECT value FROM json_each(?1)) AND status = 'ENQUEUED' RETURNING ",
            workflow_columns!()
        ))
        .bind(dialect::list(&chosen))
        .bind(&claim.worker_id)
        .bind(&claim.session_id)
        .bind(&claim.app_version)
        .bind(now)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        let claimed = Self::with_replay_steps(&mut tx, claimed).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(claimed)
    }

    /// Claimed rows with their checkpoints, oldest first; read in the claim's transaction. A
    /// first dispatch (epoch 1) has no steps yet; only re-dispatches need theirs.
    pub(super) async fn with_replay_steps(
        tx: &mut sqlx::SqliteConnection,
        mut claimed: Vec<WorkflowRow>,
    ) -> StoreResult<Vec<ClaimedWorkflow>> {
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
                " FROM steps WHERE workflow_id IN (SELECT value FROM json_each(?1)) ORDER BY workflow_id, step_id"
            ))
            .bind(dialect::list(&replays))
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?
        };
        rows::group_steps(rows::workflows(claimed)?, step_rows)
    }
}
