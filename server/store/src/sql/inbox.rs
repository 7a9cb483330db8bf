//! Reading a workflow's inbox from outside: every message, and which waits have one unread.
//! Sends and receives differ by backend (`messages.rs` in each).

use super::dialect;
use super::Backend;
use crate::messaging::MessageRow;
use crate::rows::db_error;
use crate::*;

impl Backend {
    /// Every message sent to a workflow, oldest first.
    pub(crate) async fn inbox(&self, workflow_id: &str) -> StoreResult<Vec<MessageRecord>> {
        if self.workflow(workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        let rows: Vec<MessageRow> = sqlx::query_as(
            "SELECT message_id, workflow_id, topic, payload, idempotency_key, sent_at, consumed_at, consumed_by_step \
             FROM messages WHERE workflow_id = $1 ORDER BY seq",
        )
        .bind(workflow_id)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(MessageRecord::from).collect())
    }

    /// Which of these (workflow, topic) waits have an unconsumed message now.
    pub(crate) async fn unread_among(&self, waits: &[(String, String)]) -> StoreResult<Vec<(String, String)>> {
        if waits.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, topics): (Vec<&str>, Vec<&str>) = waits.iter().map(|(w, t)| (w.as_str(), t.as_str())).unzip();
        sqlx::query_as(concat!(
            "SELECT DISTINCT m.workflow_id, m.topic FROM messages m JOIN ",
            pairs!("$1", "$2"),
            " ON m.workflow_id = k.first AND m.topic = k.second WHERE m.consumed_at IS NULL"
        ))
        .bind(dialect::list(&ids))
        .bind(dialect::list(&topics))
        .fetch_all(self.reader())
        .await
        .map_err(db_error)
    }
}
