//! Deleting finished workflows. The rows recorded for a workflow (steps, messages to it,
//! events and their history, stream values, remote-step attempts) reference it with
//! `ON DELETE CASCADE` on both backends, so deleting its row deletes them in the same statement.

use super::{dialect, Backend};
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl Lifecycle for Backend {
    #[tracing::instrument(name = "store.delete_workflow", level = "debug", target = "waymark::store", skip_all)]
    async fn delete_workflow(&self, workflow_id: &str, cascade: bool) -> StoreResult<Vec<String>> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let target: Option<(String, Option<String>)> =
            sqlx::query_as("SELECT status, parent_workflow_id FROM workflows WHERE workflow_id = $1")
                .bind(workflow_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?;
        let Some((_, parent)) = target else {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        };
        if let Some(parent) = parent {
            let status: Option<String> = sqlx::query_scalar("SELECT status FROM workflows WHERE workflow_id = $1")
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
            sqlx::query_scalar(
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
        let unfinished: Option<(String, String)> = sqlx::query_as(concat!(
            "SELECT workflow_id, status FROM workflows WHERE workflow_id",
            in_list!("$1"),
            " AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') LIMIT 1"
        ))
        .bind(dialect::list(&ids))
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
        let deleted: Vec<String> = sqlx::query_scalar(concat!(
            "DELETE FROM workflows WHERE workflow_id",
            in_list!("$1"),
            " AND status NOT IN ('ENQUEUED', 'DELAYED', 'PENDING') RETURNING workflow_id"
        ))
        .bind(dialect::list(&ids))
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
        if !dialect::try_lock_collector(&mut tx).await? {
            return Ok(None);
        }
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
               AND NOT EXISTS (SELECT 1 FROM workflows p WHERE p.workflow_id = w.parent_workflow_id \
                 AND p.status IN ('ENQUEUED', 'DELAYED', 'PENDING')) \
               ORDER BY w.updated_at, w.workflow_id LIMIT ${limit}{}) \
             AND status IN {FINISHED} RETURNING workflow_id",
            skip_locked_of!("w")
        );
        // Only placeholders and fixed SQL are formatted in; every value is bound.
        let mut q = sqlx::query_scalar(sqlx::AssertSqlSafe(text));
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
}

/// The finished statuses, as SQL.
const FINISHED: &str = "('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')";

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
