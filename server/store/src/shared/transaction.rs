//! The transaction handle the engine composes durable operations with: each table operation is
//! the statement (or two) it names, on one database transaction.

use super::fencing::workflow_on;
use super::fencing::{fenced_step, fenced_step_alone, insert_step};
use crate::changes::Change;
use crate::dialect::Backend;
use crate::rows::db_error;
use crate::*;

/// A transaction of `store`, begun at `now`.
pub(crate) struct Tx<'s, B: Backend> {
    store: &'s B,
    tx: sqlx::Transaction<'static, B::Db>,
    now: Millis,
}

pub(crate) async fn begin_at<B: Backend>(store: &B, now: Millis) -> StoreResult<Box<dyn Transaction + '_>> {
    let tx = store.writer().begin().await.map_err(db_error)?;
    Ok(Box::new(Tx { store, tx, now }))
}

#[async_trait::async_trait]
impl<'s, B: Backend> Transaction for Tx<'s, B> {
    async fn fence(&mut self, fence: &Fence, step_id: u32, lock: FenceLock) -> StoreResult<Option<StepRecord>> {
        match lock {
            FenceLock::Shared => fenced_step::<B>(&mut self.tx, fence, step_id).await,
            FenceLock::Alone => fenced_step_alone::<B>(&mut self.tx, fence, step_id).await,
        }
    }

    async fn record_step(&mut self, fence: &Fence, step_id: u32, name: &str, output: &str) -> StoreResult<bool> {
        insert_step::<B>(&mut self.tx, fence, step_id, name, output, self.now).await
    }

    async fn workflow(&mut self, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>> {
        workflow_on::<B>(&mut *self.tx, workflow_id).await
    }

    async fn set_event(&mut self, workflow_id: &str, key: &str, value: &str, step_id: u32) -> StoreResult<()> {
        B::query(
            "INSERT INTO events (workflow_id, event_key, value, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (workflow_id, event_key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        )
        .bind(workflow_id)
        .bind(key)
        .bind(value)
        .bind(self.now)
        .execute(&mut *self.tx)
        .await
        .map_err(db_error)?;
        B::query(
            "INSERT INTO event_history (workflow_id, event_key, value, step_id, set_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(workflow_id)
        .bind(key)
        .bind(value)
        .bind(step_id as i64)
        .bind(self.now)
        .execute(&mut *self.tx)
        .await
        .map_err(db_error)?;
        Ok(())
    }

    async fn event(&mut self, workflow_id: &str, key: &str) -> StoreResult<Option<String>> {
        crate::shared::events::event_value::<B>(&mut *self.tx, workflow_id, key).await
    }

    async fn append_stream(&mut self, workflow_id: &str, key: &str, value: Option<&str>) -> StoreResult<u64> {
        let offset: i64 = B::query_scalar(
            "SELECT COALESCE(MAX(position) + 1, 0) FROM streams WHERE workflow_id = $1 AND stream_key = $2",
        )
        .bind(workflow_id)
        .bind(key)
        .fetch_one(&mut *self.tx)
        .await
        .map_err(db_error)?;
        B::query(
            "INSERT INTO streams (workflow_id, stream_key, position, value, closed, written_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(workflow_id)
        .bind(key)
        .bind(offset)
        .bind(value)
        .bind(value.is_none())
        .bind(self.now)
        .execute(&mut *self.tx)
        .await
        .map_err(db_error)?;
        Ok(offset as u64)
    }

    async fn insert_child(&mut self, parent: &str, child: &NewWorkflow) -> StoreResult<bool> {
        let (traceparent, tracestate) = crate::rows::trace_columns(child.trace.as_ref());
        let done = B::query(
            "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, created_at, \
               updated_at, parent_workflow_id, deadline_at, priority, traceparent, tracestate, tags) \
             VALUES ($1, $2, 'ENQUEUED', $3, $4, $5, $6, $6, $7, \
               (SELECT CASE WHEN p.deadline_at IS NULL THEN CAST($8 AS BIGINT) WHEN CAST($8 AS BIGINT) IS NULL \
                 THEN p.deadline_at WHEN p.deadline_at < CAST($8 AS BIGINT) THEN p.deadline_at ELSE CAST($8 AS BIGINT) END \
                FROM workflows p WHERE p.workflow_id = $7), $9, $10, $11, $12) \
             ON CONFLICT (workflow_id) DO NOTHING",
        )
        .bind(&child.workflow_id)
        .bind(&child.workflow_name)
        .bind(&child.queue_name)
        .bind(&child.app_version)
        .bind(&child.input)
        .bind(self.now)
        .bind(parent)
        .bind(child.deadline_at)
        .bind(child.priority as i64)
        .bind(traceparent)
        .bind(tracestate)
        .bind(crate::rows::tags_column(&child.tags))
        .execute(&mut *self.tx)
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    async fn send(&mut self, message: &NewMessage) -> StoreResult<Sent> {
        super::messages::insert_message::<B>(&mut self.tx, message, self.now).await
    }

    async fn take_message(&mut self, workflow_id: &str, topic: &str, step_id: u32) -> StoreResult<Option<String>> {
        let taken = super::messages::consume_oldest::<B>(&mut self.tx, workflow_id, topic, step_id, self.now).await?;
        Ok(taken.map(|(_, payload)| payload))
    }

    async fn wake_parked(&mut self, workflow_id: Option<&str>, on: &ParkedOn) -> StoreResult<u64> {
        super::parking::wake_parked::<B>(&mut self.tx, workflow_id, on, self.now).await
    }

    async fn commit(self: Box<Self>, changes: Vec<Change>) -> StoreResult<()> {
        let Tx { store, tx, .. } = *self;
        tx.commit().await.map_err(db_error)?;
        for change in changes {
            store.announce_soon(change);
        }
        Ok(())
    }

    async fn rollback(self: Box<Self>) {
        super::let_go(self.tx, ()).await
    }
}
