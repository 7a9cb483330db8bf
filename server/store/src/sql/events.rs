//! Events: set (current value + history + step in one fenced transaction), get, and the
//! recorded get a workflow makes.

use super::dialect;
use super::fencing::{fenced_step, insert_step};
use super::{Backend, Db};
use crate::messaging::{self, EventHistoryRow, EventRow};
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl Events for Backend {
    async fn set_event_step(
        &self,
        fence: &Fence,
        step_id: u32,
        key: &str,
        value: &str,
        now: Millis,
    ) -> StoreResult<()> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_set_event(&fence.workflow_id, &done);
        }
        sqlx::query(
            "INSERT INTO events (workflow_id, event_key, value, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (workflow_id, event_key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(&fence.workflow_id)
        .bind(key)
        .bind(value)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        sqlx::query(
            "INSERT INTO event_history (workflow_id, event_key, value, step_id, set_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&fence.workflow_id)
        .bind(key)
        .bind(value)
        .bind(step_id as i64)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        insert_step(
            &mut tx,
            fence,
            step_id,
            SET_EVENT_STEP,
            &messaging::set_event_output(key),
            now,
        )
        .await?;
        // Workflows parked waiting for this event go back to their queue.
        let on = ParkedOn::Event {
            workflow_id: fence.workflow_id.clone(),
            key: key.to_string(),
        };
        super::parking::wake_parked(&mut tx, None, &on, now).await?;
        let change = crate::changes::Change::Event {
            workflow_id: fence.workflow_id.clone(),
            key: key.to_string(),
        };
        tx.commit().await.map_err(db_error)?;
        self.announce_soon(change);
        Ok(())
    }

    async fn get_event(&self, workflow_id: &str, key: &str) -> StoreResult<Option<String>> {
        if self.workflow(workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        event_value(self.reader(), workflow_id, key).await
    }

    async fn get_event_step(
        &self,
        fence: &Fence,
        step_id: u32,
        target: &str,
        key: &str,
        deadline: Millis,
        now: Millis,
    ) -> StoreResult<Received> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_get_event(&fence.workflow_id, &done);
        }
        if Self::workflow_on(&mut *tx, target).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(target.to_string()));
        }
        let received = match event_value(&mut *tx, target, key).await? {
            Some(value) => {
                insert_step(
                    &mut tx,
                    fence,
                    step_id,
                    GET_EVENT_STEP,
                    &messaging::get_event_output(Some(&value)),
                    now,
                )
                .await?;
                Received::Delivered(value)
            }
            None if now >= deadline => {
                insert_step(
                    &mut tx,
                    fence,
                    step_id,
                    GET_EVENT_STEP,
                    &messaging::get_event_output(None),
                    now,
                )
                .await?;
                Received::TimedOut
            }
            None => Received::Waiting,
        };
        tx.commit().await.map_err(db_error)?;
        Ok(received)
    }

    async fn list_events(&self, workflow_id: &str) -> StoreResult<Vec<EventRecord>> {
        if self.workflow(workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        let current: Vec<EventRow> =
            sqlx::query_as("SELECT event_key, value, updated_at FROM events WHERE workflow_id = $1 ORDER BY event_key")
                .bind(workflow_id)
                .fetch_all(self.reader())
                .await
                .map_err(db_error)?;
        let history: Vec<EventHistoryRow> = sqlx::query_as(
            "SELECT event_key, value, step_id, set_at FROM event_history WHERE workflow_id = $1 ORDER BY seq",
        )
        .bind(workflow_id)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(messaging::events(current, history))
    }

    async fn events_set(&self, keys: &[(String, String)]) -> StoreResult<Vec<(String, String)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, keys): (Vec<&str>, Vec<&str>) = keys.iter().map(|(w, k)| (w.as_str(), k.as_str())).unzip();
        sqlx::query_as(concat!(
            "SELECT e.workflow_id, e.event_key FROM events e JOIN ",
            pairs!("$1", "$2"),
            " ON e.workflow_id = k.first AND e.event_key = k.second"
        ))
        .bind(dialect::list(&ids))
        .bind(dialect::list(&keys))
        .fetch_all(self.reader())
        .await
        .map_err(db_error)
    }
}

/// The current value of an event, read on `exec`.
async fn event_value<'e, E: sqlx::Executor<'e, Database = Db>>(
    exec: E,
    workflow_id: &str,
    key: &str,
) -> StoreResult<Option<String>> {
    sqlx::query_scalar("SELECT value FROM events WHERE workflow_id = $1 AND event_key = $2")
        .bind(workflow_id)
        .bind(key)
        .fetch_optional(exec)
        .await
        .map_err(db_error)
}
