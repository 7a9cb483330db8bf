//! Flow control on PostgreSQL: starts (dedup ids, delays, debounce, direct dispatch) and the
//! claim of a queue with limits.
//!
//! A limited claim locks the queue's row first, in a statement of its own, so every claimer of
//! that queue — on any replica — takes its turn, and the counts read by the next statement (a
//! fresh snapshot under read committed) include everything the previous holder admitted.

use super::PostgresStore;
use crate::dialect::{Backend, Starts};
use crate::rows::{self, db_error};
use crate::shared::starts::{debounce_onto, insert_row, try_start};
use crate::*;
use sqlx::PgPool;

impl Starts for PostgresStore {
    async fn start(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        if new.debounce.is_some() {
            return self.start_debounced(new, now).await;
        }
        // Group-committed, as one multi-row statement (see `starts.rs`).
        let started = self.starts.submit((new, now)).await??;
        if started.created && started.workflow.status == WorkflowStatus::Enqueued {
            self.announce_soon(crate::changes::Change::enqueued_on(&started.workflow.queue_name));
        }
        Ok(started)
    }

    /// One statement, autocommit.
    async fn start_alone(pool: &PgPool, new: &NewWorkflow, now: Millis) -> StoreResult<Started> {
        // A conflict on the dedup id with a workflow that finishes before we read it leaves
        // nothing to report: insert again.
        for _ in 0..3 {
            let mut conn = pool.acquire().await.map_err(db_error)?;
            if let Some(started) = try_start::<PostgresStore>(&mut conn, new, now).await? {
                return Ok(started);
            }
        }
        Err(StoreError::Unavailable(
            "the start kept conflicting with workflows that finished meanwhile".into(),
        ))
    }

    /// The heads of each partition's backlog, at most `rooms[i]` of partition `keys[i]`, each
    /// locked (skipping rows another claim holds): one statement for every partition.
    async fn partition_heads(
        tx: &mut sqlx::PgConnection,
        queue: &str,
        claim: &Claim,
        keys: &[String],
        rooms: &[i64],
    ) -> StoreResult<Vec<(String, String, bool)>> {
        sqlx::query_as(
            "SELECT w.workflow_id, w.partition_key, w.started_at IS NOT NULL \
             FROM unnest($2::text[], $3::bigint[]) AS p(k, n) CROSS JOIN LATERAL \
               (SELECT workflow_id, partition_key, started_at, priority, created_at FROM workflows \
                WHERE status = 'ENQUEUED' AND queue_name = $1 AND partition_key = p.k \
                  AND workflow_name = ANY($4) AND (app_version IS NULL OR app_version = $5) \
                ORDER BY priority, created_at, workflow_id LIMIT p.n FOR UPDATE SKIP LOCKED) w",
        )
        .bind(queue)
        .bind(keys)
        .bind(rooms)
        .bind(&claim.workflow_names)
        .bind(&claim.app_version)
        .fetch_all(tx)
        .await
        .map_err(db_error)
    }

    /// Inserts a workflow as a start does, inside the caller's transaction, or finds the one
    /// already under its id (of another workflow name: `WorkflowIdConflict`) or holding its
    /// dedup id. Schedules start this way, with the same insert as every start, so queues,
    /// limits, names and app versions behave the same whoever starts. Announcing the new work is
    /// the caller's (after its commit).
    async fn insert_workflow(conn: &mut sqlx::PgConnection, new: &NewWorkflow, now: Millis) -> StoreResult<Started> {
        try_start::<PostgresStore>(conn, new, now).await?.ok_or_else(|| {
            StoreError::Unavailable(format!("workflow {:?} was neither started nor found", new.workflow_id))
        })
    }
}

impl PostgresStore {
    /// Collapses onto the not-yet-started workflow with the same name and debounce key, or
    /// inserts one. The row lock taken here keeps the wake pass from starting it mid-update.
    async fn start_debounced(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        let d = new.debounce.clone().expect("debounced start");
        for _ in 0..3 {
            let mut tx = self.pool.begin().await.map_err(db_error)?;
            let updated = debounce_onto::<PostgresStore>(&mut tx, &new, &d.key, now).await?;
            if let Some(row) = updated {
                tx.commit().await.map_err(db_error)?;
                return Ok(Started {
                    workflow: row.try_into()?,
                    created: false,
                });
            }
            let inserted = insert_row::<PostgresStore>(&mut *tx, &new, now).await?;
            tx.commit().await.map_err(db_error)?;
            if let Some(row) = inserted {
                return Ok(Started {
                    workflow: row.try_into()?,
                    created: true,
                });
            }
            if let Some(existing) =
                crate::shared::fencing::workflow_on::<PostgresStore>(&self.pool, &new.workflow_id).await?
            {
                return rows::existing_start(&new, existing);
            }
            // Another start with this key inserted first: collapse onto it.
        }
        Err(StoreError::Unavailable(
            "the debounced start kept racing with others".into(),
        ))
    }
}
