//! Dispatch from a queue with limits. The claim holds the queue's row for its transaction
//! (PostgreSQL's `FOR UPDATE`; SQLite's one writer), so every claimer of that queue — on any
//! replica — takes its turn, and the counts it reads include everything the previous holder
//! admitted. The store counts and reads the heads of the backlog; what goes out is decided in
//! `queues::admission`. Reading each partition's heads differs by backend
//! (`partition_heads` in each `flow.rs`).

use crate::dialect::{sql, Backend, Conn, Dialect};
use crate::queues::admission::{self, Load};

use crate::queues::{queue_columns, QueueRow};
use crate::rows::{self, db_error, step_columns, workflow_columns, StepRow, WorkflowRow};
use crate::*;

/// Most partitions looked at by one claim; the rest wait for a later one.
const MAX_PARTITIONS: i64 = 1024;

pub(crate) async fn claim_from_limited<B: Backend>(
    store: &B,
    queue: &str,
    claim: &Claim,
    now: Millis,
) -> StoreResult<Vec<ClaimedWorkflow>> {
    if claim.limit == 0 || claim.workflow_names.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = store.writer().begin().await.map_err(db_error)?;
    // Nothing waiting (by this snapshot): no need to queue for the lock.
    let q: Option<QueueRow> = B::query_as(sql!(B:
        "SELECT ",
        queue_columns!(),
        " FROM queues WHERE queue_name = $1 AND EXISTS (SELECT 1 FROM workflows \
           WHERE status = 'ENQUEUED' AND queue_name = $1)",
        B::FOR_UPDATE
    ))
    .bind(queue)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db_error)?;
    let Some(q) = q else {
        return super::let_go(tx, Ok(Vec::new())).await;
    };
    let limits = QueueRecord::from(q).limits;
    let window_start = limits.rate_limit.map_or(Millis::MAX, |r| now - r.period_ms);
    let (running, running_here, started_in_window): (i64, i64, i64) = B::query_as(
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
        return super::let_go(tx, Ok(Vec::new())).await;
    }
    let candidates: Vec<(String, String, bool)> = if limits.partition_concurrency.is_some() {
        let by_partition: Vec<(String, i64)> = B::query_as(
            "SELECT partition_key, COUNT(*) FROM workflows WHERE queue_name = $1 AND status = 'PENDING' \
             GROUP BY partition_key",
        )
        .bind(queue)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        load.running_by_partition = by_partition.into_iter().map(|(k, n)| (k, n as u64)).collect();
        let keys = partitions::<B>(&mut tx, queue).await?;
        let (keys, rooms): (Vec<String>, Vec<i64>) = keys
            .into_iter()
            .map(|k| {
                let n = admission::partition_room(&limits, &load, &k).min(room) as i64;
                (k, n)
            })
            .filter(|(_, n)| *n > 0)
            .unzip();
        B::partition_heads(&mut tx, queue, claim, &keys, &rooms).await?
    } else {
        B::query_as(sql!(B:
            "SELECT workflow_id, partition_key, started_at IS NOT NULL FROM workflows \
             WHERE status = 'ENQUEUED' AND queue_name = $1 AND workflow_name",
            B::in_list("$2"),
            " AND (app_version IS NULL OR app_version = $3) \
             ORDER BY priority, created_at, workflow_id LIMIT $4",
            B::SKIP_LOCKED
        ))
        .bind(queue)
        .bind_list(&claim.workflow_names)
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
        return super::let_go(tx, Ok(Vec::new())).await;
    }
    let claimed: Vec<WorkflowRow> = B::query_as(sql!(B:
        "UPDATE workflows SET status = 'PENDING', worker_id = $2, session_id = $3, epoch = epoch + 1, \
           app_version = COALESCE(app_version, $4), updated_at = $5, started_at = COALESCE(started_at, $5) \
         WHERE workflow_id",
        B::in_list("$1"),
        " AND ",
        B::status_is("", "ENQUEUED"),
        " RETURNING ",
        workflow_columns!()
    ))
    .bind_list(&chosen)
    .bind(&claim.worker_id)
    .bind(&claim.session_id)
    .bind(&claim.app_version)
    .bind(now)
    .fetch_all(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    with_replay_steps(store, claimed).await
}

/// Claimed rows with their checkpoints, oldest first. A first dispatch (epoch 1) has no
/// steps; re-dispatched workflows' steps are read after the claim committed, when no older
/// epoch can write any more (record_step is fenced), so the read is complete.
pub(crate) async fn with_replay_steps<B: Backend>(
    store: &B,
    mut claimed: Vec<WorkflowRow>,
) -> StoreResult<Vec<ClaimedWorkflow>> {
    if claimed.is_empty() {
        return Ok(Vec::new());
    }
    // RETURNING has no order; the contract says oldest first.
    claimed.sort_by(|a, b| (a.priority, a.created_at, &a.workflow_id).cmp(&(b.priority, b.created_at, &b.workflow_id)));
    let replays: Vec<&str> = claimed
        .iter()
        // A first dispatch has nothing recorded — unless it is a fork, which starts with
        // its source's steps.
        .filter(|w| w.epoch > 1 || w.forked_from.is_some())
        .map(|w| w.workflow_id.as_str())
        .collect();
    let step_rows: Vec<StepRow> = if replays.is_empty() {
        Vec::new()
    } else {
        B::query_as(sql!(B:
            "SELECT ",
            step_columns!(),
            " FROM steps WHERE workflow_id",
            B::in_list("$1"),
            " ORDER BY workflow_id, step_id"
        ))
        .bind_list(&replays)
        .fetch_all(store.reader())
        .await
        .map_err(db_error)?
    };
    rows::group_steps(rows::workflows(claimed)?, step_rows)
}

/// The partition keys with workflows waiting, by skipping through the partition index
/// (one probe per key, however deep each partition's backlog).
async fn partitions<B: Dialect>(tx: &mut Conn<B>, queue: &str) -> StoreResult<Vec<String>> {
    let keys: Vec<(String,)> = B::query_as(
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
