//! Worker streams: claims of queues without limits (each row locked and skipped by other
//! claimers on PostgreSQL, so replicas claiming at once split the work), leases, and taking
//! back what a stream no longer holds. The claim of a queue with limits is in `limited.rs`.

use super::limited::{claim_from_limited, with_replay_steps};
use crate::changes::Change;
use crate::dialect::{sql, Backend};
use crate::queues::has_limits;
use crate::rows::{self, db_error, workflow_columns, WorkflowRow};
use crate::*;

/// Counts a recovery and requeues or dead-letters. `$1` is the limit, `$2` now.
macro_rules! recover_set {
    () => {
        "recovery_attempts = recovery_attempts + 1, \
         status = CASE WHEN recovery_attempts + 1 > $1 THEN 'MAX_RECOVERY_ATTEMPTS_EXCEEDED' ELSE 'ENQUEUED' END, \
         updated_at = $2"
    };
}

/// What a recovery statement returned (workflow, new status), with the requeued ones
/// announced to the other replicas.
pub(crate) fn recovered<B: Backend>(store: &B, rows: Vec<(String, String)>) -> Recovery {
    let recovery = rows::recovery(rows);
    if !recovery.requeued.is_empty() {
        store.announce_soon(Change::enqueued());
    }
    recovery
}

/// Creates or extends a stream's lease, with its load when the heartbeat brings one.
async fn upsert_session<B: Backend>(
    store: &B,
    session_id: &str,
    worker_id: &str,
    until: Millis,
    load: Option<&str>,
    now: Millis,
) -> StoreResult<()> {
    B::query(
        "INSERT INTO worker_sessions (session_id, worker_id, lease_expires_at, updated_at, load) \
         VALUES ($1, $4, $2, $3, $5) \
         ON CONFLICT (session_id) DO UPDATE SET lease_expires_at = excluded.lease_expires_at, \
           updated_at = excluded.updated_at, load = COALESCE(excluded.load, worker_sessions.load)",
    )
    .bind(session_id)
    .bind(until)
    .bind(now)
    .bind(worker_id)
    .bind(load)
    .execute(store.writer())
    .await
    .map_err(db_error)?;
    Ok(())
}

#[async_trait::async_trait]
impl<B: Backend> Workers for B {
    #[tracing::instrument(name = "store.claim_workflows", level = "debug", target = "waymark::store", skip_all)]
    async fn claim_workflows(&self, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        if claim.limit == 0 || claim.workflow_names.is_empty() || claim.queues.is_empty() {
            return Ok(Vec::new());
        }
        // One autocommit statement: the claim is atomic by itself, and a first dispatch (epoch 1)
        // has no steps to load, so the common case costs one round trip and one commit. Steps
        // of re-dispatched workflows are read after the claim committed; a late write from an
        // older epoch cannot land after that (record_step is fenced), so the read is complete.
        // The outer status check re-checks the locked row. Queues with limits are left to
        // `claim_limited` (judged by their stored row as this statement runs).
        let claimed: Vec<WorkflowRow> = B::query_as(sql!(B:
                    "UPDATE workflows SET status = 'PENDING', worker_id = $1, session_id = $7, epoch = epoch + 1, \
                       app_version = COALESCE(app_version, $2), updated_at = $3, started_at = COALESCE(started_at, $3) \
                     WHERE workflow_id",
                    B::in_locked(&[
        "SELECT workflow_id FROM workflows WHERE status = 'ENQUEUED' AND queue_name",
        &B::in_list("$4"),
        " AND queue_name",
        &B::not_in_once(&[
        "SELECT queue_name FROM queues WHERE queue_name",
        &B::in_list("$4"),
        " AND ",
        has_limits!(),
        ]),
        " AND workflow_name",
        &B::in_list("$5"),
        " AND (app_version IS NULL OR app_version = $2) \
                         ORDER BY priority, created_at, workflow_id LIMIT $6",
        ]),
                    " AND ",
                    B::status_is("", "ENQUEUED"),
                    " RETURNING ",
                    workflow_columns!()
                ))
        .bind(&claim.worker_id)
        .bind(&claim.app_version)
        .bind(now)
        .bind_list(&claim.queues)
        .bind_list(&claim.workflow_names)
        .bind(claim.limit as i64)
        .bind(&claim.session_id)
        .fetch_all(self.writer())
        .await
        .map_err(db_error)?;
        with_replay_steps(self, claimed).await
    }

    #[tracing::instrument(name = "store.claim_limited", level = "debug", target = "waymark::store", skip_all)]
    async fn claim_limited(&self, queue: &str, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        claim_from_limited(self, queue, claim, now).await
    }

    #[tracing::instrument(
        name = "store.renew_session_lease",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn renew_session_lease(
        &self,
        session_id: &str,
        worker_id: &str,
        until: Millis,
        now: Millis,
    ) -> StoreResult<()> {
        upsert_session(self, session_id, worker_id, until, None, now).await
    }

    #[tracing::instrument(
        name = "store.heartbeat_session",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn heartbeat_session(
        &self,
        session_id: &str,
        worker_id: &str,
        until: Millis,
        load: &str,
        now: Millis,
    ) -> StoreResult<()> {
        upsert_session(self, session_id, worker_id, until, Some(load), now).await
    }

    #[tracing::instrument(
        name = "store.describe_session",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn describe_session(&self, session_id: &str, info: &str) -> StoreResult<()> {
        B::query("UPDATE worker_sessions SET info = $2 WHERE session_id = $1")
            .bind(session_id)
            .bind(info)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(())
    }

    #[tracing::instrument(name = "store.live_sessions", level = "debug", target = "waymark::store", skip_all)]
    async fn live_sessions(&self, now: Millis, limit: u32) -> StoreResult<Vec<SessionRecord>> {
        let rows: Vec<(String, String, Option<String>, Option<String>, i64, i64)> = B::query_as(
            "SELECT session_id, worker_id, info, load, lease_expires_at, updated_at FROM worker_sessions \
             WHERE lease_expires_at > $1 ORDER BY worker_id, session_id LIMIT $2",
        )
        .bind(now)
        .bind(limit as i64)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(
                |(session_id, worker_id, info, load, lease_expires_at, updated_at)| SessionRecord {
                    session_id,
                    worker_id,
                    info,
                    load,
                    lease_expires_at,
                    updated_at,
                },
            )
            .collect())
    }

    #[tracing::instrument(name = "store.hold_worker_id", level = "debug", target = "waymark::store", skip_all)]
    async fn hold_worker_id(
        &self,
        session_id: &str,
        worker_id: &str,
        key_id: Option<&str>,
        until: Millis,
        now: Millis,
    ) -> StoreResult<bool> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        B::lock_worker_id(&mut tx, worker_id).await?;
        // One statement that checks and writes: on SQLite its first statement is the write, so
        // another process's commit cannot leave this transaction on a stale read.
        let written = B::query(
            "INSERT INTO worker_sessions (session_id, worker_id, key_id, lease_expires_at, updated_at) \
             SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (\
               SELECT 1 FROM worker_sessions WHERE worker_id = $2 AND lease_expires_at > $5 \
                 AND key_id IS DISTINCT FROM $3) \
             ON CONFLICT (session_id) DO UPDATE SET lease_expires_at = excluded.lease_expires_at, updated_at = excluded.updated_at",
        )
        .bind(session_id)
        .bind(worker_id)
        .bind(key_id)
        .bind(until)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(written.rows_affected() == 1)
    }

    #[tracing::instrument(name = "store.release_worker", level = "debug", target = "waymark::store", skip_all)]
    async fn release_worker(&self, worker_id: &str, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        let rows: Vec<(String, String)> = B::query_as(concat!(
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
        Ok(recovered(self, rows))
    }

    #[tracing::instrument(name = "store.release_lost", level = "debug", target = "waymark::store", skip_all)]
    async fn release_lost(&self, lost: &[Fence], max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        if lost.is_empty() {
            return Ok(Recovery::default());
        }
        let ids: Vec<&str> = lost.iter().map(|f| f.workflow_id.as_str()).collect();
        let epochs: Vec<String> = lost.iter().map(|f| f.epoch.to_string()).collect();
        let rows: Vec<(String, String)> = B::query_as(sql!(B:
            "UPDATE workflows SET ",
            recover_set!(),
            " WHERE status = 'PENDING' AND EXISTS (SELECT 1 FROM ",
            B::pairs("$3", "$4"),
            " WHERE k.first = workflows.workflow_id AND CAST(k.second AS BIGINT) = workflows.epoch) \
             RETURNING workflow_id, status"
        ))
        .bind(max_recovery_attempts as i64)
        .bind(now)
        .bind_list(&ids)
        .bind_list(&epochs)
        .fetch_all(self.writer())
        .await
        .map_err(db_error)?;
        Ok(recovered(self, rows))
    }

    #[tracing::instrument(name = "store.release_unsent", level = "debug", target = "waymark::store", skip_all)]
    async fn release_unsent(&self, session_id: &str, sent: &[Fence], now: Millis) -> StoreResult<Recovery> {
        let ids: Vec<&str> = sent.iter().map(|f| f.workflow_id.as_str()).collect();
        let epochs: Vec<String> = sent.iter().map(|f| f.epoch.to_string()).collect();
        let rows: Vec<(String, String)> = B::query_as(sql!(B:
            "UPDATE workflows SET status = 'ENQUEUED', updated_at = $1 \
             WHERE status = 'PENDING' AND session_id = $2 AND NOT EXISTS (SELECT 1 FROM ",
            B::pairs("$3", "$4"),
            " WHERE k.first = workflows.workflow_id AND CAST(k.second AS BIGINT) = workflows.epoch) \
             RETURNING workflow_id, status"
        ))
        .bind(now)
        .bind(session_id)
        .bind_list(&ids)
        .bind_list(&epochs)
        .fetch_all(self.writer())
        .await
        .map_err(db_error)?;
        Ok(recovered(self, rows))
    }

    #[tracing::instrument(name = "store.recover_expired", level = "debug", target = "waymark::store", skip_all)]
    async fn recover_expired(&self, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery> {
        // Replicas recovering at the same time split the rows instead of waiting on each other
        // (or on a worker's in-flight step write); a skipped row is picked up by the next pass.
        let rows: Vec<(String, String)> = B::query_as(sql!(B:
            "UPDATE workflows SET ",
            recover_set!(),
            " WHERE workflow_id",
            B::in_locked(&[
"SELECT wf.workflow_id FROM workflows wf WHERE wf.status = 'PENDING' AND NOT EXISTS \
                 (SELECT 1 FROM worker_sessions w WHERE w.session_id = wf.session_id AND w.lease_expires_at >= $2)",
]),
            " AND ",
            B::status_is("", "PENDING"),
            " RETURNING workflow_id, status"
        ))
        .bind(max_recovery_attempts as i64)
        .bind(now)
        .fetch_all(self.writer())
        .await
        .map_err(db_error)?;
        Ok(recovered(self, rows))
    }

    #[tracing::instrument(name = "store.prune_sessions", level = "debug", target = "waymark::store", skip_all)]
    async fn prune_sessions(&self, before: Millis) -> StoreResult<u64> {
        let done = B::query(
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
