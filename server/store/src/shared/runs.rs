//! Continue-as-new: the run of a workflow that loops forever ends, its history is kept under
//! an ended-run row of its own (`<id>/run-<n>`, CONTINUED_AS_NEW), and the workflow goes on
//! under its id — which every awaiter, parent, sender and event reader keeps using — with a
//! new input and a fresh, empty history, back in its queue.
//!
//! What moves to the ended run: its steps, its remote-step calls, its events' history and the
//! messages it consumed (their records name its step positions, which the next run reuses).
//! What stays with the workflow: the events' current values, its streams, the messages not yet
//! read, its children, its deadline, tags and lineage.

use crate::dialect::{sql, Backend, Conn};
use crate::rows::{self, db_error, workflow_columns, WorkflowRow};
use crate::*;

/// The id of a workflow's ended run number `run`.
fn ended_run_id(workflow_id: &str, run: u32) -> String {
    format!("{workflow_id}/run-{run}")
}

pub(crate) async fn continue_run<B: Backend>(
    store: &B,
    fence: &Fence,
    input: &str,
    now: Millis,
) -> StoreResult<ContinuedAsNew> {
    let mut tx = store.writer().begin().await.map_err(db_error)?;
    let current: Option<WorkflowRow> = B::query_as(sql!(B:
        "SELECT ",
        workflow_columns!(),
        " FROM workflows WHERE workflow_id = $1",
        B::FOR_UPDATE
    ))
    .bind(&fence.workflow_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db_error)?;
    let current = current.map(WorkflowRecord::try_from).transpose()?;
    let w = match current {
        Some(w) if w.status == WorkflowStatus::Pending && w.epoch == fence.epoch => w,
        other => {
            // The same request again (its reply was lost): the run it ended is there.
            if let Some(workflow) = &other {
                if let Some(ended) = held!(tx, ended_at::<B>(&mut tx, fence, workflow.run).await) {
                    let adopted = ContinuedAsNew {
                        workflow: other.expect("checked above"),
                        ended_run: ended,
                        adopted: true,
                    };
                    return super::let_go(tx, Ok(adopted)).await;
                }
            }
            return super::let_go(tx, Err(rows::refusal(&fence.workflow_id, other, fence.epoch))).await;
        }
    };
    let ended = ended_run_id(&w.workflow_id, w.run);
    B::query(
        "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, created_at, \
           updated_at, recovery_attempts, epoch, priority, partition_key, started_at, traceparent, tracestate, \
           forked_from, forked_from_step, tags, run, continued_as) \
         SELECT $2, workflow_name, 'CONTINUED_AS_NEW', queue_name, app_version, input, created_at, $3, \
           recovery_attempts, epoch, priority, partition_key, started_at, traceparent, tracestate, forked_from, \
           forked_from_step, tags, run, workflow_id FROM workflows WHERE workflow_id = $1",
    )
    .bind(&w.workflow_id)
    .bind(&ended)
    .bind(now)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    for moved in [
        "UPDATE steps SET workflow_id = $2 WHERE workflow_id = $1",
        "UPDATE step_tasks SET workflow_id = $2 WHERE workflow_id = $1",
        "UPDATE event_history SET workflow_id = $2 WHERE workflow_id = $1",
        "UPDATE messages SET workflow_id = $2 WHERE workflow_id = $1 AND consumed_at IS NOT NULL",
    ] {
        B::query(moved)
            .bind(&w.workflow_id)
            .bind(&ended)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
    }
    // The epoch moves on at once, so nothing more of the ended run lands here.
    let row: WorkflowRow = B::query_as(concat!(
        "UPDATE workflows SET input = $2, status = 'ENQUEUED', output = NULL, failure = NULL, worker_id = NULL, \
           session_id = NULL, recovery_attempts = 0, run = run + 1, epoch = epoch + 1, wake_at = NULL, \
           parked_on = NULL, updated_at = $3 WHERE workflow_id = $1 RETURNING ",
        workflow_columns!()
    ))
    .bind(&w.workflow_id)
    .bind(input)
    .bind(now)
    .fetch_one(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    store.announce_soon(crate::changes::Change::enqueued());
    Ok(ContinuedAsNew {
        workflow: row.try_into()?,
        ended_run: ended,
        adopted: false,
    })
}

/// The ended run this fence's run became, if it was the last to continue as new (the
/// workflow is now on run `run`). Looked up by its id, so a refusal costs no scan; a resend
/// from a run older than the last is refused as stale, which ends it on that worker all the same.
async fn ended_at<B: Backend>(conn: &mut Conn<B>, fence: &Fence, run: u32) -> StoreResult<Option<String>> {
    let Some(last) = run.checked_sub(1) else {
        return Ok(None);
    };
    B::query_scalar("SELECT workflow_id FROM workflows WHERE workflow_id = $1 AND continued_as = $2 AND epoch = $3")
        .bind(ended_run_id(&fence.workflow_id, last))
        .bind(&fence.workflow_id)
        .bind(fence.epoch as i64)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db_error)
}
