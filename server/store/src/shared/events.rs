//! Events: reads from outside a workflow, and which waits have theirs set. (Setting an event and
//! a workflow's recorded read are composed by the engine from table operations.)

use crate::dialect::{sql, Backend, Dialect, Exec};
use crate::messaging::{self, EventHistoryRow, EventRow};
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl<B: Backend> Events for B {
    #[tracing::instrument(name = "store.get_event", level = "debug", target = "waymark::store", skip_all)]
    async fn get_event(&self, workflow_id: &str, key: &str) -> StoreResult<Option<String>> {
        if crate::shared::fencing::workflow_on::<B>(self.reader(), workflow_id)
            .await?
            .is_none()
        {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        event_value::<B>(self.reader(), workflow_id, key).await
    }

    #[tracing::instrument(name = "store.list_events", level = "debug", target = "waymark::store", skip_all)]
    async fn list_events(&self, workflow_id: &str) -> StoreResult<Vec<EventRecord>> {
        if crate::shared::fencing::workflow_on::<B>(self.reader(), workflow_id)
            .await?
            .is_none()
        {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        let current: Vec<EventRow> =
            B::query_as("SELECT event_key, value, updated_at FROM events WHERE workflow_id = $1 ORDER BY event_key")
                .bind(workflow_id)
                .fetch_all(self.reader())
                .await
                .map_err(db_error)?;
        let history: Vec<EventHistoryRow> = B::query_as(
            "SELECT event_key, value, step_id, set_at FROM event_history WHERE workflow_id = $1 ORDER BY seq",
        )
        .bind(workflow_id)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(messaging::events(current, history))
    }

    #[tracing::instrument(name = "store.events_set", level = "debug", target = "waymark::store", skip_all)]
    async fn events_set(&self, keys: &[(String, String)]) -> StoreResult<Vec<(String, String)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, keys): (Vec<&str>, Vec<&str>) = keys.iter().map(|(w, k)| (w.as_str(), k.as_str())).unzip();
        B::query_as(sql!(B:
            "SELECT e.workflow_id, e.event_key FROM events e JOIN ",
            B::pairs("$1", "$2"),
            " ON e.workflow_id = k.first AND e.event_key = k.second"
        ))
        .bind_list(&ids)
        .bind_list(&keys)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)
    }
}

/// The current value of an event, read on `exec`.
pub(crate) async fn event_value<'e, D: Dialect>(
    exec: impl Exec<'e, D>,
    workflow_id: &str,
    key: &str,
) -> StoreResult<Option<String>> {
    D::query_scalar("SELECT value FROM events WHERE workflow_id = $1 AND event_key = $2")
        .bind(workflow_id)
        .bind(key)
        .fetch_optional(exec)
        .await
        .map_err(db_error)
}
