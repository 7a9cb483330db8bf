//! Steps: a workflow's checkpoints and its completion. The hot path — recording a step and
//! completing — is group-committed differently by each backend (`steps.rs` in each); reads are
//! the same.

use super::fencing::workflow_on;
use crate::dialect::{sql, Backend};
use crate::rows::{self, db_error, step_columns, StepRow};
use crate::*;

#[async_trait::async_trait]
impl<B: Backend> Steps for B {
    #[tracing::instrument(name = "store.list_steps", level = "debug", target = "waymark::store", skip_all)]
    async fn list_steps(&self, workflow_id: &str) -> StoreResult<Vec<StepRecord>> {
        let rows: Vec<StepRow> = B::query_as(concat!(
            "SELECT ",
            step_columns!(),
            " FROM steps WHERE workflow_id = $1 ORDER BY step_id"
        ))
        .bind(workflow_id)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        if rows.is_empty() && workflow_on::<B>(self.reader(), workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        rows::steps(rows)
    }

    #[tracing::instrument(name = "store.record_step", level = "debug", target = "waymark::store", skip_all)]
    async fn record_step(&self, fence: &Fence, step: NewStep, now: Millis) -> StoreResult<Recorded> {
        self.record(fence, step, now).await
    }

    #[tracing::instrument(
        name = "store.complete_workflow",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn complete_workflow(&self, fence: &Fence, outcome: Outcome, now: Millis) -> StoreResult<Completed> {
        if let Some(row) = self.finish_fenced(fence, outcome, now).await? {
            self.announce_soon(crate::changes::Change::Finished {
                workflow_id: fence.workflow_id.clone(),
            });
            return Ok(Completed {
                workflow: row.try_into()?,
                adopted: false,
            });
        }
        // Terminal is terminal until an operator resumes, so the outcome read here is the one
        // that beat us.
        match workflow_on::<B>(self.writer(), &fence.workflow_id).await? {
            Some(w) if w.status.is_terminal() => Ok(Completed {
                workflow: w,
                adopted: true,
            }),
            current => Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
        }
    }

    #[tracing::instrument(
        name = "store.complete_with_steps",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn complete_with_steps(
        &self,
        fence: &Fence,
        steps: Vec<NewStep>,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<Completed> {
        if !steps.is_empty() {
            if let Some(done) = self.complete_in_one(fence, &steps, &outcome, now).await? {
                return Ok(done);
            }
        }
        // No steps, or not all went in at once (a retried completion, a conflict, a lost
        // fence): one by one, so each refusal is explained.
        crate::contract::steps::record_then_complete(self, fence, steps, outcome, now).await
    }

    #[tracing::instrument(name = "store.steps_recorded", level = "debug", target = "waymark::store", skip_all)]
    async fn steps_recorded(&self, keys: &[(String, u32)]) -> StoreResult<Vec<(String, u32)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<&str> = keys.iter().map(|(w, _)| w.as_str()).collect();
        let steps: Vec<String> = keys.iter().map(|(_, s)| s.to_string()).collect();
        let found: Vec<(String, i64)> = B::query_as(sql!(B:
            "SELECT s.workflow_id, s.step_id FROM steps s JOIN ",
            B::pairs("$1", "$2"),
            " ON s.workflow_id = k.first AND s.step_id = CAST(k.second AS BIGINT)"
        ))
        .bind_list(&ids)
        .bind_list(&steps)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(found.into_iter().map(|(w, s)| (w, s as u32)).collect())
    }
}
