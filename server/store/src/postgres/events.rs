//! Events on PostgreSQL: set (current value + history + step in one transaction, fenced by the
//! workflow row lock), get, and the recorded get a workflow makes.

use super::messages::{fenced_step, insert_step};
use super::PostgresStore;
use crate::messaging::{self, EventHistoryRow, EventRow};
use crate::rows::db_error;
use crate::*;

impl PostgresStore {
    pub(super) async fn set_event_step_impl(
        &self,
        fence: &Fence,
        step_id: u32,
        key: &str,
        value: &str,
        now: Millis,
    ) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
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

    async fn event_value<'e, E: sqlx::Executor<'e, Database = sqlx::Postgres>>(
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

    pub(super) async fn get_event_impl(&self, workflow_id: &str, key: &str) -> StoreResult<Option<String>> {
        if self.workflow(workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        Self::event_value(&self.pool, workflow_id, key).await
    }

    pub(super) async fn get_event_step_impl(
        &self,
        fence: &Fence,
        step_id: u32,
        target: &str,
        key: &str,
        deadline: Millis,
        now: Millis,
    ) -> StoreResult<Received> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_get_event(&fence.workflow_id, &done);
        }
        if sqlx::query_scalar::<_, i32>("SELECT 1 FROM workflows WHERE workflow_id = $1")
            .bind(target)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?
            .is_none()
        {
            return Err(StoreError::WorkflowNotFound(target.to_string()));
        }
        let received = match Self::event_value(&mut *tx, target, key).await? {
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

    pub(super) async fn list_events_impl(&self, workflow_id: &str) -> StoreResult<Vec<EventRecord>> {
        if self.workflow(workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        let current: Vec<EventRow> =
            sqlx::query_as("SELECT event_key, value, updated_at FROM events WHERE workflow_id = $1 ORDER BY event_key")
                .bind(workflow_id)
                .fetch_all(&self.pool)
                .await
                .map_err(db_error)?;
        let history: Vec<EventHistoryRow> = sqlx::query_as(
            "SELECT event_key, value, step_id, set_at FROM event_history WHERE workflow_id = $1 ORDER BY seq",
        )
        .bind(workflow_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(messaging::events(current, history))
    }

    pub(super) async fn events_set_impl(&self, keys: &[(String, String)]) -> StoreResult<Vec<(String, String)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, names): (Vec<&str>, Vec<&str>) = keys.iter().map(|(w, k)| (w.as_str(), k.as_str())).unzip();
        sqlx::query_as(
            "SELECT e.workflow_id, e.event_key FROM events e \
             JOIN unnest($1::text[], $2::text[]) AS k(workflow_id, event_key) \
               ON e.workflow_id = k.workflow_id AND e.event_key = k.event_key",
        )
        .bind(&ids)
        .bind(&names)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }
}
