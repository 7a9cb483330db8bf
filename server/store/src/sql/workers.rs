//! Worker streams: their leases, and taking back what a stream no longer holds. Claims differ
//! by backend (`dispatch.rs` and `flow.rs` in each).

use super::Backend;
use crate::changes::Change;
use crate::rows::{self, db_error};
use crate::*;

/// Counts a recovery and requeues or dead-letters. `$1` is the limit, `$2` now.
macro_rules! recover_set {
    () => {
        "recovery_attempts = recovery_attempts + 1, \
         status = CASE WHEN recovery_attempts + 1 > $1 THEN 'MAX_RECOVERY_ATTEMPTS_EXCEEDED' ELSE 'ENQUEUED' END, \
         updated_at = $2"
    };
}
pub(crate) use recover_set;

impl Backend {
    /// What a recovery statement returned (workflow, new status), with the requeued ones
    /// announced to the other replicas.
    pub(crate) fn recovered(&self, rows: Vec<(String, String)>) -> Recovery {
        let recovery = rows::recovery(rows);
        if !recovery.requeued.is_empty() {
            self.announce_soon(Change::Enqueued);
        }
        recovery
    }
}

#[async_trait::async_trait]
impl Workers for Backend {
    async fn claim_workflows(&self, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        if claim.limit == 0 || claim.workflow_names.is_empty() || claim.queues.is_empty() {
            return Ok(Vec::new());
        }
        self.claim(claim, now).await
    }

    async fn claim_limited(&self, queue: &str, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        self.claim_from_limited(queue, claim, now).await
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
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn release_worker(&self, worker_id: &str, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        let rows: Vec<(String, String)> = sqlx::query_as(concat!(
            "UPDATE workflows SET ",
            recover_set!(),
            " WHERE status = 'PENDING' AND worker_id = $3 RETURNING workflow_id, status"
        ))
        .bind(max_recovery_attempts as i64)
        .bind(now)
        .bind(worker_id)
        .fetch_all(self.writer())
        .await
        .map_err(db_error)?;
        Ok(self.recovered(rows))
    }

    async fn release_lost(&self, lost: &[Fence], max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        self.release_fenced(lost, max_recovery_attempts, now).await
    }

    async fn recover_expired(&self, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        // Replicas recovering at the same time split the rows instead of waiting on each other
        // (or on a worker's in-flight step write); a skipped row is picked up by the next pass.
        let rows: Vec<(String, String)> = sqlx::query_as(concat!(
            "UPDATE workflows SET ",
            recover_set!(),
            " WHERE workflow_id",
            in_locked!(
                "SELECT wf.workflow_id FROM workflows wf WHERE wf.status = 'PENDING' AND NOT EXISTS \
                 (SELECT 1 FROM worker_sessions w WHERE w.session_id = wf.session_id AND w.lease_expires_at >= $2)"
            ),
            " AND status = 'PENDING' RETURNING workflow_id, status"
        ))
        .bind(max_recovery_attempts as i64)
        .bind(now)
        .fetch_all(self.writer())
        .await
        .map_err(db_error)?;
        Ok(self.recovered(rows))
    }

    async fn prune_sessions(&self, before: Millis) -> StoreResult<u64> {
        let done = sqlx::query(
            "DELETE FROM worker_sessions WHERE lease_expires_at < $1 AND NOT EXISTS \
             (SELECT 1 FROM workflows WHERE workflows.session_id = worker_sessions.session_id AND status = 'PENDING')",
        )
        .bind(before)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected())
    }
}
