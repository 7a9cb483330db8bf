//! The durable operations the server records for a workflow, composed from the store's table
//! operations in one transaction each (see `waymark_store::Transaction`): check the fence,
//! answer a replay from the record, write, record the step, wake what waited — one commit.
//! Nothing here knows a database; the store's conformance suite holds each table operation to
//! the same behaviour on both backends.

use waymark_store::changes::Change;
use waymark_store::recorded as journal;
use waymark_store::{
    ChildOutcome, Fence, FenceLock, Millis, NewWorkflow, ParkedOn, Received, Store, StoreError, StoreResult,
    Transaction, AWAIT_CHILD_STEP, CLOSE_STREAM_STEP, GET_EVENT_STEP, SET_EVENT_STEP, START_CHILD_STEP,
    WRITE_STREAM_STEP,
};

/// Records the step; a concurrent request for the same step that got there first makes this
/// one a database-level retry (its replay is answered from that record).
async fn record(
    tx: &mut Box<dyn Transaction + '_>,
    fence: &Fence,
    step_id: u32,
    name: &str,
    output: &str,
) -> StoreResult<()> {
    if tx.record_step(fence, step_id, name, output).await? {
        Ok(())
    } else {
        Err(StoreError::Unavailable(format!("{name} step recorded concurrently")))
    }
}

/// Sets event `key` of the fenced workflow, recorded as its step `step_id`; the workflows
/// parked on the event go back to their queue. A replay changes nothing.
pub async fn set_event(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    key: &str,
    value: &str,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = store.begin(now).await?;
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_set_event(&fence.workflow_id, &done);
    }
    tx.set_event(&fence.workflow_id, key, value, step_id).await?;
    record(&mut tx, fence, step_id, SET_EVENT_STEP, &journal::set_event_output(key)).await?;
    let on = ParkedOn::Event {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    tx.wake_parked(None, &on).await?;
    let change = Change::Event {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    tx.commit(vec![change]).await
}

/// Reads another workflow's event for the fenced workflow, recording the outcome as its step:
/// `Delivered` when set, `TimedOut` past `deadline`, else `Waiting` (nothing written). A
/// recorded step is answered from the record.
pub async fn get_event(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    target: &str,
    key: &str,
    deadline: Millis,
    now: Millis,
) -> StoreResult<Received> {
    let mut tx = store.begin(now).await?;
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_get_event(&fence.workflow_id, &done);
    }
    if tx.workflow(target).await?.is_none() {
        return Err(StoreError::WorkflowNotFound(target.to_string()));
    }
    let received = match tx.event(target, key).await? {
        Some(value) => Received::Delivered(value),
        None if now >= deadline => Received::TimedOut,
        None => {
            // Nothing to write: end the transaction now, releasing the fence's row lock.
            tx.commit(Vec::new()).await?;
            return Ok(Received::Waiting);
        }
    };
    let output = match &received {
        Received::Delivered(value) => journal::get_event_output(Some(value)),
        _ => journal::get_event_output(None),
    };
    record(&mut tx, fence, step_id, GET_EVENT_STEP, &output).await?;
    tx.commit(Vec::new()).await?;
    Ok(received)
}

/// Appends `value` to the fenced workflow's stream `key` (or with `None` closes it), recorded
/// as its step; returns the entry's offset. A replay returns the recorded offset.
pub async fn write_stream(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    key: &str,
    value: Option<&str>,
    now: Millis,
) -> StoreResult<u64> {
    let name = if value.is_some() {
        WRITE_STREAM_STEP
    } else {
        CLOSE_STREAM_STEP
    };
    let mut tx = store.begin(now).await?;
    // Appends of one workflow take turns, so two cannot take one offset.
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Alone).await? {
        return journal::replay_stream(&fence.workflow_id, &done, name);
    }
    let offset = tx.append_stream(&fence.workflow_id, key, value).await?;
    record(&mut tx, fence, step_id, name, &journal::stream_output(offset)).await?;
    let change = Change::Stream {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    tx.commit(vec![change]).await?;
    Ok(offset)
}

/// Starts a child of the fenced workflow, recorded as its step in the same transaction as the
/// child's row. A replay returns the recorded child id. A child id taken by another workflow
/// name is `WorkflowIdConflict`; taken by the same name, it is joined.
pub async fn start_child(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    child: NewWorkflow,
    now: Millis,
) -> StoreResult<(String, bool)> {
    let mut tx = store.begin(now).await?;
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return Ok((journal::replay_start_child(&fence.workflow_id, &done)?, false));
    }
    let inserted = tx.insert_child(&fence.workflow_id, &child).await?;
    let existing = tx
        .workflow(&child.workflow_id)
        .await?
        .ok_or_else(|| StoreError::WorkflowNotFound(child.workflow_id.clone()))?;
    if existing.workflow_name != child.workflow_name {
        return Err(StoreError::WorkflowIdConflict {
            workflow_id: child.workflow_id,
            existing_name: existing.workflow_name,
        });
    }
    let output = journal::child_started_output(&child.workflow_id);
    record(&mut tx, fence, step_id, START_CHILD_STEP, &output).await?;
    let changes = if inserted { vec![Change::Enqueued] } else { Vec::new() };
    tx.commit(changes).await?;
    Ok((child.workflow_id, inserted))
}

/// If `child_id` has finished, records how as step `step_id` of the fenced workflow and
/// returns it; `None` while it runs. A recorded step is answered from the record.
pub async fn await_child(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    child_id: &str,
    now: Millis,
) -> StoreResult<Option<ChildOutcome>> {
    let mut tx = store.begin(now).await?;
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_await_child(&fence.workflow_id, &done).map(Some);
    }
    let child = tx
        .workflow(child_id)
        .await?
        .ok_or_else(|| StoreError::WorkflowNotFound(child_id.to_string()))?;
    if !child.status.is_terminal() {
        tx.commit(Vec::new()).await?;
        return Ok(None);
    }
    let outcome = journal::child_outcome(&child);
    record(
        &mut tx,
        fence,
        step_id,
        AWAIT_CHILD_STEP,
        &journal::await_child_output(&outcome),
    )
    .await?;
    tx.commit(Vec::new()).await?;
    Ok(Some(outcome))
}
