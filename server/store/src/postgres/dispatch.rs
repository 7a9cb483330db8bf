//! Dispatch on PostgreSQL: claims of queues without limits, and taking back runs a worker
//! lost. Claims lock their rows `FOR UPDATE SKIP LOCKED`, so replicas claiming at once split
//! the work instead of queueing behind each other.

use super::sql::workers::recover_set;
use super::PostgresStore;
use crate::queues::has_limits;
use crate::rows::{db_error, workflow_columns, WorkflowRow};
use crate::*;

impl PostgresStore {
    pub(super) async fn claim(&self, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
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

    pub(super) async fn release_fenced(
        &self,
        lost: &[Fence],
        max_recovery_attempts: u32,
        now: Millis,
    ) -> StoreResult<Recovery> {
        let ids: Vec<&str> = lost.iter().map(|f| f.workflow_id.as_str()).collect();
        let epochs: Vec<i64> = lost.iter().map(|f| f.epoch as i64).collect();
        let rows: Vec<(String, String)> = sqlx::query_as(concat!(
            "UPDATE workflows SET ",
            recover_set!(),
            " FROM UNNEST($3::text[], $4::bigint[]) AS l(id, epoch) \
             WHERE workflows.workflow_id = l.id AND workflows.epoch = l.epoch AND status = 'PENDING' \
             RETURNING workflows.workflow_id, status"
        ))
        .bind(max_recovery_attempts as i64)
        .bind(now)
        .bind(&ids)
        .bind(&epochs)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(self.recovered(rows))
    }
}
