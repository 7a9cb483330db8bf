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

/// How a composed operation ends its transaction: committed, with what the other replicas are
/// told, or let go of with nothing written (a replay, a wait, a refusal).
enum End<T> {
    Commit(T, Vec<Change>),
    Release(T),
}

/// Ends `tx` as `body` says. A refusal and an answer that wrote nothing roll back at once, so
/// the fence's row lock is not left for the connection pool to clear later (a claim passes a
/// locked workflow by, and a stale worker's refused write would hold back its redispatch).
async fn settle<T>(tx: Box<dyn Transaction + '_>, body: StoreResult<End<T>>) -> StoreResult<T> {
    match body {
        Ok(End::Commit(answer, changes)) => {
            tx.commit(changes).await?;
            Ok(answer)
        }
        Ok(End::Release(answer)) => {
            tx.rollback().await;
            Ok(answer)
        }
        Err(e) => {
            tx.rollback().await;
            Err(e)
        }
    }
}

type Tx<'a, 's> = &'a mut Box<dyn Transaction + 's>;

/// Records the step; a concurrent request for the same step that got there first makes this
/// one a database-level retry (its replay is answered from that record).
async fn record(tx: Tx<'_, '_>, fence: &Fence, step_id: u32, name: &str, output: &str) -> StoreResult<()> {
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
    let body = set_event_in(&mut tx, fence, step_id, key, value).await;
    settle(tx, body).await
}

async fn set_event_in(tx: Tx<'_, '_>, fence: &Fence, step_id: u32, key: &str, value: &str) -> StoreResult<End<()>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_set_event(&fence.workflow_id, &done).map(End::Release);
    }
    tx.set_event(&fence.workflow_id, key, value, step_id).await?;
    record(tx, fence, step_id, SET_EVENT_STEP, &journal::set_event_output(key)).await?;
    let on = ParkedOn::Event {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    tx.wake_parked(None, &on).await?;
    let change = Change::Event {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    Ok(End::Commit((), vec![change]))
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
    let body = get_event_in(&mut tx, fence, step_id, target, key, now >= deadline).await;
    settle(tx, body).await
}

async fn get_event_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    target: &str,
    key: &str,
    past_deadline: bool,
) -> StoreResult<End<Received>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_get_event(&fence.workflow_id, &done).map(End::Release);
    }
    if tx.workflow(target).await?.is_none() {
        return Err(StoreError::WorkflowNotFound(target.to_string()));
    }
    let received = match tx.event(target, key).await? {
        Some(value) => Received::Delivered(value),
        None if past_deadline => Received::TimedOut,
        None => return Ok(End::Release(Received::Waiting)),
    };
    let output = match &received {
        Received::Delivered(value) => journal::get_event_output(Some(value)),
        _ => journal::get_event_output(None),
    };
    record(tx, fence, step_id, GET_EVENT_STEP, &output).await?;
    Ok(End::Commit(received, Vec::new()))
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
    let mut tx = store.begin(now).await?;
    let body = write_stream_in(&mut tx, fence, step_id, key, value).await;
    settle(tx, body).await
}

async fn write_stream_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    key: &str,
    value: Option<&str>,
) -> StoreResult<End<u64>> {
    let name = if value.is_some() {
        WRITE_STREAM_STEP
    } else {
        CLOSE_STREAM_STEP
    };
    // Appends of one workflow take turns, so two cannot take one offset.
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Alone).await? {
        return journal::replay_stream(&fence.workflow_id, &done, name).map(End::Release);
    }
    let offset = tx.append_stream(&fence.workflow_id, key, value).await?;
    record(tx, fence, step_id, name, &journal::stream_output(offset)).await?;
    let change = Change::Stream {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    Ok(End::Commit(offset, vec![change]))
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
    let body = start_child_in(&mut tx, fence, step_id, child).await;
    settle(tx, body).await
}

async fn start_child_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    child: NewWorkflow,
) -> StoreResult<End<(String, bool)>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        let id = journal::replay_start_child(&fence.workflow_id, &done)?;
        return Ok(End::Release((id, false)));
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
    record(tx, fence, step_id, START_CHILD_STEP, &output).await?;
    let changes = if inserted { vec![Change::Enqueued] } else { Vec::new() };
    Ok(End::Commit((child.workflow_id, inserted), changes))
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
    let body = await_child_in(&mut tx, fence, step_id, child_id).await;
    settle(tx, body).await
}

async fn await_child_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    child_id: &str,
) -> StoreResult<End<Option<ChildOutcome>>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_await_child(&fence.workflow_id, &done).map(|o| End::Release(Some(o)));
    }
    let child = tx
        .workflow(child_id)
        .await?
        .ok_or_else(|| StoreError::WorkflowNotFound(child_id.to_string()))?;
    if !child.status.is_terminal() {
        return Ok(End::Release(None));
    }
    let outcome = journal::child_outcome(&child);
    let output = journal::await_child_output(&outcome);
    record(tx, fence, step_id, AWAIT_CHILD_STEP, &output).await?;
    Ok(End::Commit(Some(outcome), Vec::new()))
}
