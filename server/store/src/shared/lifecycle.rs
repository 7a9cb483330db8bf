//! Deleting finished workflows. The rows recorded for a workflow (steps, messages to it,
//! events and their history, stream values, remote-step attempts) reference it with
//! `ON DELETE CASCADE` on both backends, so deleting its row deletes them in the same statement.

use super::fencing::workflow_on;
use super::runs::continue_run;
use crate::changes::Change;
use crate::dialect::{sql, Backend, Conn, Dialect};
use crate::rows::{db_error, workflow_columns, WorkflowRow};
use crate::*;

#[async_trait::async_trait]
impl<B: Backend> Lifecycle for B {
    #[tracing::instrument(name = "store.delete_workflow", level = "debug", target = "waymark::store", skip_all)]
    async fn delete_workflow(&self, workflow_id: &str, cascade: bool) -> StoreResult<Vec<String>> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let target: Option<(String, Option<String>)> =
            B::query_as("SELECT status, parent_workflow_id FROM workflows WHERE workflow_id = $1")
                .bind(workflow_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
        let Some((_, parent)) = target else {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        };
        if let Some(parent) = parent {
            let status: Option<String> = B::query_scalar("SELECT status FROM workflows WHERE workflow_id = $1")
                .bind(&parent)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
            if status
                .as_deref()
                .and_then(WorkflowStatus::parse)
                .is_some_and(|s| !s.is_terminal())
            {
                return Err(StoreError::ParentNotFinished {
                    workflow_id: workflow_id.to_string(),
                    parent_workflow_id: parent,
                });
            }
        }
        let ids: Vec<String> = if cascade {
            // The tree below it, one more than the bound so a larger one is seen.
            B::query_scalar(
                "WITH RECURSIVE tree(workflow_id) AS ( \
                   SELECT workflow_id FROM workflows WHERE workflow_id = $1 \
                   UNION SELECT w.workflow_id FROM workflows w JOIN tree t ON w.parent_workflow_id = t.workflow_id \
                 ) SELECT workflow_id FROM tree LIMIT $2",
            )
            .bind(workflow_id)
            .bind(MAX_DELETE as i64 + 1)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?
        } else {
            vec![workflow_id.to_string()]
        };
        if ids.len() > MAX_DELETE {
            return Err(StoreError::TooManyToDelete {
                workflow_id: workflow_id.to_string(),
                limit: MAX_DELETE,
            });
        }
        let unfinished: Option<(String, String)> = B::query_as(sql!(B:
            "SELECT workflow_id, status FROM workflows WHERE workflow_id",
            B::in_list("$1"),
            " AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') LIMIT 1"
        ))
        .bind_list(&ids)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        if let Some((id, status)) = unfinished {
            return Err(StoreError::NotFinished {
                workflow_id: id,
                status: WorkflowStatus::parse(&status).unwrap_or(WorkflowStatus::Pending),
            });
        }
        // Still only while finished: one resumed since the check above stays.
        let deleted: Vec<String> = B::query_scalar(sql!(B:
            "DELETE FROM workflows WHERE workflow_id",
            B::in_list("$1"),
            " AND status NOT IN ('ENQUEUED', 'DELAYED', 'PENDING') RETURNING workflow_id"
        ))
        .bind_list(&ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(deleted)
    }

    #[tracing::instrument(
        name = "store.collect_finished",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn collect_finished(&self, batch: &Collect) -> StoreResult<Option<Vec<String>>> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        if !B::try_lock_collector(&mut tx).await? {
            return Ok(None);
        }
        let (text, binds) = collect_statement::<B>(batch);
        let mut q = B::query_scalar(sqlx::AssertSqlSafe(text));
        for b in &binds {
            q = q.bind(b);
        }
        let deleted: Vec<String> = q
            .bind(batch.finished_before)
            .bind(batch.limit as i64)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        Ok(Some(deleted))
    }

    #[tracing::instrument(name = "store.fork_workflow", level = "debug", target = "waymark::store", skip_all)]
    async fn fork_workflow(&self, fork: &Fork, now: Millis) -> StoreResult<WorkflowRecord> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let source = workflow_on::<B>(&mut *tx, &fork.source)
            .await?
            .ok_or_else(|| StoreError::WorkflowNotFound(fork.source.clone()))?;
        let last: Option<i64> = B::query_scalar("SELECT MAX(step_id) FROM steps WHERE workflow_id = $1")
            .bind(&fork.source)
            .fetch_one(&mut *tx)
            .await
            .map_err(db_error)?;
        let from = fork
            .from_step
            .map(i64::from)
            .unwrap_or_else(|| last.map_or(0, |l| l + 1));
        let inserted: Option<WorkflowRow> = B::query_as(concat!(
            "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, \
               created_at, updated_at, epoch, priority, partition_key, forked_from, forked_from_step, tags) \
             VALUES ($1, $2, 'ENQUEUED', $3, $4, $5, $6, $6, 0, $7, $8, $9, $10, $11) \
             ON CONFLICT DO NOTHING RETURNING ",
            workflow_columns!()
        ))
        .bind(&fork.new_workflow_id)
        .bind(&source.workflow_name)
        .bind(fork.queue_name.as_ref().unwrap_or(&source.queue_name))
        .bind(fork.app_version.as_ref().or(source.app_version.as_ref()))
        .bind(&source.input)
        .bind(now)
        .bind(source.priority as i64)
        .bind(&source.partition_key)
        .bind(&fork.source)
        .bind(from)
        .bind(crate::rows::tags_column(&source.tags))
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let Some(row) = inserted else {
            // Taken: by this same fork made before (a retried call), or by anything else.
            let existing = workflow_on::<B>(&mut *tx, &fork.new_workflow_id).await?;
            return match existing {
                Some(w) if w.forked_from.as_ref().is_some_and(|l| l.workflow_id == fork.source) => Ok(w),
                Some(w) => Err(StoreError::WorkflowIdConflict {
                    workflow_id: w.workflow_id,
                    existing_name: w.workflow_name,
                }),
                None => Err(StoreError::Unavailable(
                    "the fork was neither inserted nor found".into(),
                )),
            };
        };
        copy_history::<B>(&mut tx, &fork.source, &fork.new_workflow_id, from).await?;
        tx.commit().await.map_err(db_error)?;
        self.announce_soon(Change::enqueued());
        row.try_into()
    }

    #[tracing::instrument(name = "store.continue_as_new", level = "debug", target = "waymark::store", skip_all)]
    async fn continue_as_new(&self, fence: &Fence, input: &str, now: Millis) -> StoreResult<ContinuedAsNew> {
        continue_run(self, fence, input, now).await
    }

    #[tracing::instrument(name = "store.set_app_version", level = "debug", target = "waymark::store", skip_all)]
    async fn set_app_version(&self, workflow_id: &str, app_version: &str, now: Millis) -> StoreResult<WorkflowRecord> {
        let row: Option<WorkflowRow> = B::query_as(concat!(
            "UPDATE workflows SET app_version = $2, updated_at = $3 WHERE workflow_id = $1 \
               AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') RETURNING ",
            workflow_columns!()
        ))
        .bind(workflow_id)
        .bind(app_version)
        .bind(now)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        match row {
            Some(r) => {
                let w: WorkflowRecord = r.try_into()?;
                if w.status == WorkflowStatus::Enqueued {
                    // Claimers of the new version may be idle: tell them.
                    self.announce_soon(Change::enqueued());
                }
                Ok(w)
            }
            None => match workflow_on::<B>(self.reader(), workflow_id).await? {
                None => Err(StoreError::WorkflowNotFound(workflow_id.to_string())),
                Some(w) => Err(StoreError::Finished {
                    workflow_id: workflow_id.to_string(),
                    status: w.status,
                }),
            },
        }
    }
}

/// [`Lifecycle::fork_workflow`]'s copy, inside its transaction: the steps before `from`,
/// the events set by then, the stream values written by the last copied step.
async fn copy_history<B: Backend>(conn: &mut Conn<B>, source: &str, fork: &str, from: i64) -> StoreResult<()> {
    B::query(
        "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at, started_at) \
         SELECT $1, step_id, name, output, failure, attempts, 0, recorded_at, started_at FROM steps \
         WHERE workflow_id = $2 AND step_id < $3",
    )
    .bind(fork)
    .bind(source)
    .bind(from)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    B::query(
        "INSERT INTO event_history (workflow_id, event_key, value, step_id, set_at) \
         SELECT $1, event_key, value, step_id, set_at FROM event_history \
         WHERE workflow_id = $2 AND step_id < $3 ORDER BY seq",
    )
    .bind(fork)
    .bind(source)
    .bind(from)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    // Each key's current value is the last it was set to before the fork point — not the
    // source's current one, which may have been set after it.
    B::query(
        "INSERT INTO events (workflow_id, event_key, value, updated_at) \
         SELECT h.workflow_id, h.event_key, h.value, h.set_at FROM event_history h \
         WHERE h.workflow_id = $1 AND h.seq = (SELECT MAX(seq) FROM event_history l \
           WHERE l.workflow_id = $1 AND l.event_key = h.event_key)",
    )
    .bind(fork)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    // A stream write is recorded in the transaction that appends it, at the same time:
    // the values written by the last copied step are those no later than its record.
    B::query(
        "INSERT INTO streams (workflow_id, stream_key, position, value, closed, written_at) \
         SELECT $1, stream_key, position, value, closed, written_at FROM streams \
         WHERE workflow_id = $2 AND written_at <= (SELECT MAX(recorded_at) FROM steps WHERE workflow_id = $1)",
    )
    .bind(fork)
    .bind(source)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    Ok(())
}

/// The finished statuses, as SQL.
const FINISHED: &str = "('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', 'CONTINUED_AS_NEW')";

/// The collector's statement for `batch` and the text values it binds first; the cutoff and the
/// limit (both integers) follow them. Only placeholders and fixed SQL are formatted in.
///
/// A parent that has not finished keeps its child: that is asked per row, of the parent's row
/// by its key, as a scalar subquery the planner cannot turn into a join. As `NOT EXISTS` it was
/// planned as one scan of the whole table for unfinished workflows per batch (estimated to find
/// none, so cheap), 150 ms per batch of 100 beside a million finished rows.
pub(crate) fn collect_statement<B: Dialect>(batch: &Collect) -> (String, Vec<String>) {
    let mut binds: Vec<String> = Vec::new();
    let covered = covered_sql(&batch.covered, &mut binds);
    let except: String = batch
        .except
        .iter()
        .map(|c| format!(" AND NOT ({})", covered_sql(c, &mut binds)))
        .collect();
    let (before, limit) = (binds.len() + 1, binds.len() + 2);
    let text = format!(
        "DELETE FROM workflows WHERE workflow_id IN (SELECT w.workflow_id FROM workflows w \
           WHERE w.status IN {FINISHED} AND w.updated_at < ${before} AND {covered}{except} \
           AND COALESCE((SELECT p.status FROM workflows p WHERE p.workflow_id = w.parent_workflow_id), 'gone') \
             NOT IN ('ENQUEUED', 'DELAYED', 'PENDING') \
           ORDER BY w.updated_at, w.workflow_id LIMIT ${limit}{}) \
         AND status IN {FINISHED} RETURNING workflow_id",
        B::skip_locked_of("w")
    );
    (text, binds)
}

/// `c` as a condition on `w`, its values appended to `binds` (placeholders numbered after
/// what is there already). TRUE when it covers every finished workflow.
fn covered_sql(c: &Covered, binds: &mut Vec<String>) -> String {
    let mut terms = Vec::new();
    let mut list = |column: &str, values: Vec<String>, binds: &mut Vec<String>| {
        let marks: Vec<String> = values
            .into_iter()
            .map(|v| {
                binds.push(v);
                format!("${}", binds.len())
            })
            .collect();
        if !marks.is_empty() {
            terms.push(format!("w.{column} IN ({})", marks.join(", ")));
        }
    };
    list("queue_name", c.queues.clone(), binds);
    list(
        "status",
        c.statuses.iter().map(|s| s.as_str().to_string()).collect(),
        binds,
    );
    if terms.is_empty() {
        "TRUE".to_string()
    } else {
        terms.join(" AND ")
    }
}
