//! How an operation writes: it composes the store's table operations in one transaction —
//! check the fence, answer a replay from the record, write, record the step, wake what waited —
//! begun with `Store::begin` and ended by [`settle`]. Nothing here knows a database; the
//! store's conformance suite holds each table operation to the same behaviour on both backends.

use waymark_store::changes::Change;
use waymark_store::{Fence, FenceLock, Millis, StepRecord, Store, StoreError, StoreResult, Transaction};

/// How a composed operation ends its transaction: committed, with what the other replicas are
/// told, or let go of with nothing written (a replay, a wait, a refusal).
pub(crate) enum End<T> {
    Commit(T, Vec<Change>),
    Release(T),
}

/// The transaction an operation's body writes through.
pub(crate) type Tx<'a, 's> = &'a mut Box<dyn Transaction + 's>;

/// Ends `tx` as `body` says. A refusal and an answer that wrote nothing roll back at once, so
/// the fence's row lock is not left for the connection pool to clear later (a claim passes a
/// locked workflow by, and a stale worker's refused write would hold back its redispatch).
pub(crate) async fn settle<T>(tx: Box<dyn Transaction + '_>, body: StoreResult<End<T>>) -> StoreResult<T> {
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

/// Records the step; a concurrent request for the same step that got there first makes this
/// one a database-level retry (its replay is answered from that record).
pub(crate) async fn record(tx: Tx<'_, '_>, fence: &Fence, step_id: u32, name: &str, output: &str) -> StoreResult<()> {
    if tx.record_step(fence, step_id, name, output).await? {
        Ok(())
    } else {
        Err(StoreError::Unavailable(format!("{name} step recorded concurrently")))
    }
}

/// The answer to a call whose step a concurrent request for the same step recorded first,
/// read from that record with `replay` (as a later replay of it would be answered).
pub(crate) async fn answer_from_record<T>(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    now: Millis,
    replay: fn(&str, &StepRecord) -> StoreResult<T>,
) -> StoreResult<T> {
    let mut tx = store.begin(now).await?;
    let recorded = tx.fence(fence, step_id, FenceLock::Shared).await;
    tx.rollback().await;
    match recorded? {
        Some(step) => replay(&fence.workflow_id, &step),
        None => Err(StoreError::Unavailable("a concurrently recorded step vanished".into())),
    }
}
