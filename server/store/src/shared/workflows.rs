//! Workflows: starts, reads, lists, cancels and resumes, deadlines, parking, and the names
//! workers registered. Starts and delayed starts differ by backend (`flow.rs` in each).

use super::fencing::workflow_on;
use super::parking::{park_fenced, wake_parked_due};
use crate::changes::Change;
use crate::dialect::{sql, Backend, Dialect};
use crate::rows::{self, db_error, workflow_columns, WorkflowRow};
use crate::*;

/// The conditions of a workflow listing: `$1`-`$12` are [`bind_filters!`]'s. Tags are matched
/// through `workflow_tags` ("key=value" rows): a workflow qualifies when it has all of them. An
/// id prefix is a range of ids, [prefix, its successor), which the primary key can serve.
fn list_filters<B: Dialect>() -> &'static str {
    sql!(B:
        "($1 IS NULL OR status",
        B::in_list("$1"),
        ") AND (CAST($2 AS TEXT) IS NULL OR workflow_name = $2) AND (CAST($3 AS TEXT) IS NULL OR queue_name = $3) \
          AND (CAST($4 AS BIGINT) IS NULL OR created_at >= $4) AND (CAST($5 AS BIGINT) IS NULL OR created_at < $5) \
          AND (CAST($6 AS TEXT) IS NULL OR worker_id = $6) AND (CAST($7 AS TEXT) IS NULL OR app_version = $7) \
          AND (CAST($8 AS TEXT) IS NULL OR parent_workflow_id = $8) \
          AND ($9 IS NULL OR workflow_id IN (SELECT workflow_id FROM workflow_tags WHERE tag",
        B::in_list("$9"),
        " GROUP BY workflow_id HAVING COUNT(*) = $10)) \
          AND (CAST($11 AS TEXT) IS NULL OR (workflow_id >= $11 AND (CAST($12 AS TEXT) IS NULL OR workflow_id < $12)))"
    )
}

/// Binds a listing's filters as `$1`-`$12` of [`list_filters`].
macro_rules! bind_filters {
    ($query:expr, $q:expr) => {{
        let q: &ListQuery = $q;
        let statuses: Vec<&str> = q.statuses.iter().map(|s| s.as_str()).collect();
        let tags = tag_rows(&q.tags);
        $query
            .bind_list_or_null((!statuses.is_empty()).then_some(&statuses[..]))
            .bind(q.workflow_name.clone())
            .bind(q.queue_name.clone())
            .bind(q.created_at_or_after)
            .bind(q.created_before)
            .bind(q.worker_id.clone())
            .bind(q.app_version.clone())
            .bind(q.parent_workflow_id.clone())
            .bind_list_or_null((!tags.is_empty()).then_some(&tags[..]))
            .bind(q.tags.len() as i64)
            .bind(q.id_prefix.clone())
            .bind(q.id_prefix.as_deref().and_then(prefix_end))
    }};
}

/// The least text greater than every text that starts with `prefix`, in code point order (the
/// ids' collation on both backends): its last character that has a successor, raised by one,
/// with what follows it dropped. `None` when no character has one (no upper bound).
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (last as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The `workflow_tags` rows of tags: "key=value" (keys hold no `=`).
fn tag_rows(tags: &Tags) -> Vec<String> {
    tags.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

#[async_trait::async_trait]
impl<B: Backend> Workflows for B {
    #[tracing::instrument(name = "store.start_workflow", level = "debug", target = "waymark::store", skip_all)]
    async fn start_workflow(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        self.start(new, now).await
    }

    #[tracing::instrument(name = "store.get_workflow", level = "debug", target = "waymark::store", skip_all)]
    async fn get_workflow(&self, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>> {
        workflow_on::<B>(self.reader(), workflow_id).await
    }

    #[tracing::instrument(name = "store.list_workflows", level = "debug", target = "waymark::store", skip_all)]
    async fn list_workflows(&self, q: &ListQuery) -> StoreResult<Vec<WorkflowRecord>> {
        let query = B::query_as(sql!(B:
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE ",
            list_filters::<B>(),
            " AND (CAST($13 AS BIGINT) IS NULL OR (created_at, workflow_id) < ($13, CAST($14 AS TEXT))) \
              ORDER BY created_at DESC, workflow_id DESC LIMIT $15"
        ));
        let rows: Vec<WorkflowRow> = bind_filters!(query, q)
            .bind(q.after.as_ref().map(|a| a.0))
            .bind(q.after.as_ref().map(|a| a.1.as_str()))
            .bind(q.limit as i64)
            .fetch_all(self.reader())
            .await
            .map_err(db_error)?;
        rows::workflows(rows)
    }

    #[tracing::instrument(name = "store.count_workflows", level = "debug", target = "waymark::store", skip_all)]
    async fn count_workflows(&self, q: &ListQuery) -> StoreResult<u64> {
        let query = B::query_scalar(sql!(B: "SELECT COUNT(*) FROM workflows WHERE ", list_filters::<B>()));
        let n: i64 = bind_filters!(query, q)
            .fetch_one(self.reader())
            .await
            .map_err(db_error)?;
        Ok(n as u64)
    }

    #[tracing::instrument(name = "store.set_start_time", level = "debug", target = "waymark::store", skip_all)]
    async fn set_start_time(&self, workflow_id: &str, run_at: Millis, now: Millis) -> StoreResult<WorkflowRecord> {
        let row: Option<WorkflowRow> = B::query_as(sql!(B:
            "UPDATE workflows SET wake_at = $2, updated_at = $3 \
             WHERE workflow_id = $1 AND ",
            B::status_is("", "DELAYED"),
            " AND epoch = 0 RETURNING ",
            workflow_columns!()
        ))
        .bind(workflow_id)
        .bind(run_at)
        .bind(now)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        match row {
            Some(r) => r.try_into(),
            None => match workflow_on::<B>(self.reader(), workflow_id).await? {
                None => Err(StoreError::WorkflowNotFound(workflow_id.to_string())),
                Some(w) => Err(StoreError::NotDelayed {
                    workflow_id: workflow_id.to_string(),
                    status: w.status,
                }),
            },
        }
    }

    #[tracing::instrument(name = "store.cancel_workflow", level = "debug", target = "waymark::store", skip_all)]
    async fn cancel_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord> {
        let cancelled: Option<WorkflowRow> = B::query_as(concat!(
            "UPDATE workflows SET status = 'CANCELLED', updated_at = $1 WHERE workflow_id = $2 \
             AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') RETURNING ",
            workflow_columns!()
        ))
        .bind(now)
        .bind(workflow_id)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        match cancelled {
            Some(row) => {
                self.announce_soon(Change::Finished {
                    workflow_id: workflow_id.to_string(),
                });
                row.try_into()
            }
            // Cancelled, finished or gone already: a finished workflow is returned as it is.
            None => workflow_on::<B>(self.writer(), workflow_id)
                .await?
                .ok_or_else(|| StoreError::WorkflowNotFound(workflow_id.to_string())),
        }
    }

    #[tracing::instrument(name = "store.resume_workflow", level = "debug", target = "waymark::store", skip_all)]
    async fn resume_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord> {
        let resumed: Option<WorkflowRow> = B::query_as(concat!(
            "UPDATE workflows SET status = 'ENQUEUED', recovery_attempts = 0, updated_at = $1 \
             WHERE workflow_id = $2 AND status IN ('CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED') RETURNING ",
            workflow_columns!()
        ))
        .bind(now)
        .bind(workflow_id)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        match resumed {
            Some(row) => {
                self.announce_soon(Change::enqueued());
                row.try_into()
            }
            None => match workflow_on::<B>(self.writer(), workflow_id).await? {
                None => Err(StoreError::WorkflowNotFound(workflow_id.to_string())),
                Some(w) if w.status == WorkflowStatus::Error => rerun_failed(self, workflow_id, now).await,
                Some(w) => Err(StoreError::NotResumable {
                    workflow_id: workflow_id.to_string(),
                    status: w.status,
                }),
            },
        }
    }

    #[tracing::instrument(name = "store.cancel_expired", level = "debug", target = "waymark::store", skip_all)]
    async fn cancel_expired(&self, now: Millis) -> StoreResult<Vec<WorkflowRecord>> {
        let rows: Vec<WorkflowRow> = B::query_as(sql!(B:
                    "UPDATE workflows SET status = 'CANCELLED', updated_at = $1 WHERE workflow_id",
                    B::in_locked(&[
        "SELECT workflow_id FROM workflows WHERE deadline_at IS NOT NULL AND deadline_at < $1 \
                         AND status IN ('ENQUEUED', 'DELAYED', 'PENDING')",
        ]),
                    " AND status IN ('ENQUEUED', 'DELAYED', 'PENDING') RETURNING ",
                    workflow_columns!()
                ))
        .bind(now)
        .fetch_all(self.writer())
        .await
        .map_err(db_error)?;
        let cancelled = rows::workflows(rows)?;
        for w in &cancelled {
            self.announce_soon(Change::Finished {
                workflow_id: w.workflow_id.clone(),
            });
        }
        Ok(cancelled)
    }

    #[tracing::instrument(name = "store.park", level = "debug", target = "waymark::store", skip_all)]
    async fn park(
        &self,
        fence: &Fence,
        step_id: u32,
        wake_at: Millis,
        on: &ParkedOn,
        now: Millis,
    ) -> StoreResult<bool> {
        park_fenced(self, fence, step_id, wake_at, on, now).await
    }

    #[tracing::instrument(name = "store.wake_due", level = "debug", target = "waymark::store", skip_all)]
    async fn wake_due(&self, now: Millis) -> StoreResult<u64> {
        wake_parked_due(self, now).await
    }

    #[tracing::instrument(name = "store.finished_among", level = "debug", target = "waymark::store", skip_all)]
    async fn finished_among(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        B::query_scalar(sql!(B:
            "SELECT workflow_id FROM workflows WHERE workflow_id",
            B::in_list("$1"),
            " AND status IN ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED', 'CONTINUED_AS_NEW')"
        ))
        .bind_list(ids)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)
    }

    #[tracing::instrument(
        name = "store.register_workflow_names",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn register_workflow_names(&self, names: &[String], now: Millis) -> StoreResult<()> {
        if names.is_empty() {
            return Ok(());
        }
        // In one order for every caller: a fleet of workers registering the same names at once
        // (each from its own hash map's order) would otherwise lock the rows in different orders
        // and deadlock.
        let mut names = names.to_vec();
        names.sort();
        names.dedup();
        let names = names.as_slice();
        B::query(sql!(B:
            "INSERT INTO workflow_names (workflow_name, first_seen_at, last_seen_at) SELECT l.value, $2, $2 FROM ",
            B::list_rows("$1"),
            " WHERE true ON CONFLICT (workflow_name) DO UPDATE SET last_seen_at = excluded.last_seen_at"
        ))
        .bind_list(names)
        .bind(now)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        Ok(())
    }

    #[tracing::instrument(
        name = "store.is_workflow_name_known",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn is_workflow_name_known(&self, name: &str) -> StoreResult<bool> {
        let found: Option<String> =
            B::query_scalar("SELECT workflow_name FROM workflow_names WHERE workflow_name = $1")
                .bind(name)
                .fetch_optional(self.reader())
                .await
                .map_err(db_error)?;
        Ok(found.is_some())
    }
}

/// Puts an ERROR workflow back in its queue without its failure and, when its last recorded
/// step failed, without that step's record (or its remote-step attempts), so the step runs
/// again — on whatever code the workers run now.
async fn rerun_failed<B: Backend>(store: &B, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord> {
    let mut tx = store.writer().begin().await.map_err(db_error)?;
    let resumed: Option<WorkflowRow> = B::query_as(concat!(
        "UPDATE workflows SET status = 'ENQUEUED', output = NULL, failure = NULL, recovery_attempts = 0, \
           updated_at = $1 WHERE workflow_id = $2 AND status = 'ERROR' RETURNING ",
        workflow_columns!()
    ))
    .bind(now)
    .bind(workflow_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db_error)?;
    let Some(row) = resumed else {
        // Resumed by another call meanwhile, or changed: say what it is now.
        let status = workflow_on::<B>(store.writer(), workflow_id)
            .await?
            .map_or(WorkflowStatus::Enqueued, |w| w.status);
        return Err(StoreError::NotResumable {
            workflow_id: workflow_id.to_string(),
            status,
        });
    };
    let failed: Option<i64> = B::query_scalar(
        "SELECT step_id FROM steps WHERE workflow_id = $1 AND failure IS NOT NULL \
         AND step_id = (SELECT MAX(step_id) FROM steps WHERE workflow_id = $1)",
    )
    .bind(workflow_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db_error)?;
    if let Some(step_id) = failed {
        for table in ["DELETE FROM steps", "DELETE FROM step_tasks"] {
            B::query(sqlx::AssertSqlSafe(format!(
                "{table} WHERE workflow_id = $1 AND step_id >= $2"
            )))
            .bind(workflow_id)
            .bind(step_id)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        }
    }
    tx.commit().await.map_err(db_error)?;
    store.announce_soon(Change::enqueued());
    row.try_into()
}
