//! Starting a workflow: the one insert every start makes (a client's, a child's, a schedule's),
//! what a start that inserted nothing finds in its way, and group commit for the starts that
//! arrive together.

use crate::dialect::{sql, Conn, Dialect, Exec, Starts};
use crate::queues::has_limits;
use crate::rows::{self, db_error, workflow_columns, WorkflowRow};
use crate::*;

/// Inserts `new` unless a unique key (its id, its live dedup id, its debounce key) is taken.
/// A direct dispatch applies only on a queue without limits and without a delay.
pub(crate) async fn insert_row<'e, B: Dialect>(
    exec: impl Exec<'e, B>,
    new: &NewWorkflow,
    now: Millis,
) -> StoreResult<Option<WorkflowRow>> {
    let a = new.assign.as_ref();
    let (traceparent, tracestate) = rows::trace_columns(new.trace.as_ref());
    B::query_as(concat!(
        "WITH a AS (SELECT CASE WHEN CAST($7 AS TEXT) IS NOT NULL AND CAST($13 AS BIGINT) IS NULL AND NOT EXISTS \
           (SELECT 1 FROM queues WHERE queue_name = $3 AND ",
        has_limits!(),
        ") THEN CAST($7 AS TEXT) END AS worker) \
         INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, created_at, \
           updated_at, epoch, worker_id, session_id, parent_workflow_id, deadline_at, priority, partition_key, \
           dedup_id, wake_at, started_at, debounce_key, debounce_until, traceparent, tracestate, tags) \
         SELECT $1, $2, CASE WHEN CAST($13 AS BIGINT) IS NOT NULL THEN 'DELAYED' WHEN a.worker IS NULL THEN 'ENQUEUED' \
           ELSE 'PENDING' END, $3, COALESCE($4, CASE WHEN a.worker IS NOT NULL THEN $9 END), $5, $6, $6, \
           CASE WHEN a.worker IS NULL THEN 0 ELSE 1 END, a.worker, CASE WHEN a.worker IS NOT NULL THEN $8 END, \
           $10, $11, $12, $14, $15, $13, CASE WHEN a.worker IS NOT NULL THEN $6 END, $16, $17, $18, $19, $20 FROM a WHERE true \
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
    .bind(traceparent)
    .bind(tracestate)
    .bind(rows::tags_column(&new.tags))
    .fetch_optional(exec)
    .await
    .map_err(db_error)
}

/// Inserts `new` on `conn`, or finds what stopped it: the workflow already under its id (the
/// same start again, or `WorkflowIdConflict`), or the unfinished holder of its dedup id
/// (`Duplicate`, or the holder when asked). `None`: neither — the holder finished between the
/// insert and the read; the caller may try again.
pub(crate) async fn try_start<B: Dialect>(
    conn: &mut Conn<B>,
    new: &NewWorkflow,
    now: Millis,
) -> StoreResult<Option<Started>> {
    if let Some(row) = insert_row::<B>(&mut *conn, new, now).await? {
        return Ok(Some(Started {
            workflow: row.try_into()?,
            created: true,
        }));
    }
    // ON CONFLICT waited for any concurrent insert of these keys to commit, so the row is
    // visible to this next statement (read committed takes a fresh snapshot).
    let row: Option<WorkflowRow> = B::query_as(concat!(
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

/// Collapses `new` onto the not-yet-started workflow with its name and debounce key, if there
/// is one: that workflow takes this input, and this start time capped by its own `until`. The
/// row is locked first (PostgreSQL), so the wake pass cannot start it mid-update.
pub(crate) async fn debounce_onto<B: Dialect>(
    conn: &mut Conn<B>,
    new: &NewWorkflow,
    key: &str,
    now: Millis,
) -> StoreResult<Option<WorkflowRow>> {
    B::query_as(sql!(B:
        "UPDATE workflows SET input = $3, wake_at = ",
        B::LEAST,
        "($4, COALESCE(debounce_until, $4)), updated_at = $5 \
         WHERE workflow_id = (SELECT workflow_id FROM workflows WHERE workflow_name = $1 AND debounce_key = $2 \
           AND status = 'DELAYED' AND epoch = 0",
        B::FOR_UPDATE,
        ") AND ",
        B::status_is("", "DELAYED"),
        " AND epoch = 0 RETURNING ",
        workflow_columns!()
    ))
    .bind(&new.workflow_name)
    .bind(key)
    .bind(&new.input)
    .bind(new.run_at)
    .bind(now)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)
}

/// The most starts one transaction takes.
pub(crate) const MAX_GROUP: usize = 128;

/// Group commit for starts: the starts that arrive while the previous group commits go into one
/// transaction and one commit, so concurrent callers share the disk's flush instead of queueing
/// for one each. Each start still gets its own answer, refusals included (its id taken by
/// another workflow name, its dedup id held), and each is answered only after the commit.
///
/// A start alone goes in a transaction of its own, as it would without grouping. If anything
/// fails the shared transaction (a database error, or a start that must be tried again), it is
/// rolled back and every start of the group is made on its own: one bad start fails alone.
pub(crate) async fn start_group<B: Starts>(
    pool: sqlx::Pool<B::Db>,
    group: Vec<(NewWorkflow, Millis)>,
) -> StoreResult<Vec<StoreResult<Started>>> {
    if group.len() > 1 {
        if let Some(answers) = in_one_transaction::<B>(&pool, &group).await {
            return Ok(answers);
        }
    }
    let mut answers = Vec::with_capacity(group.len());
    for (new, now) in &group {
        answers.push(B::start_alone(&pool, new, *now).await);
    }
    Ok(answers)
}

/// The group in one transaction, inserted in workflow id order (two groups holding the same
/// ids then wait for each other in the same order rather than deadlock); `None`, having
/// written nothing, when any start met a database error or the commit failed.
async fn in_one_transaction<B: Starts>(
    pool: &sqlx::Pool<B::Db>,
    group: &[(NewWorkflow, Millis)],
) -> Option<Vec<StoreResult<Started>>> {
    let mut order: Vec<usize> = (0..group.len()).collect();
    order.sort_by(|&a, &b| group[a].0.workflow_id.cmp(&group[b].0.workflow_id));
    let mut answers: Vec<Option<StoreResult<Started>>> = group.iter().map(|_| None).collect();
    let mut tx = pool.begin().await.ok()?;
    for i in order {
        let (new, now) = &group[i];
        match B::insert_workflow(&mut *tx, new, *now).await {
            // Dropping the transaction rolls it back.
            Err(StoreError::Unavailable(_)) => return None,
            answer => answers[i] = Some(answer),
        }
    }
    tx.commit().await.ok()?;
    answers.into_iter().collect()
}
