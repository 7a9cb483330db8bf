//! What the operations' tests share: each case run on a fresh database of each backend, and a
//! workflow made running (claimed by worker `A` at epoch 1) to write for.

use waymark_store::Store;
use waymark_store_conformance::{claim_one, session, start, wf, T};

/// Runs each case (an `async fn(Arc<dyn Store>)` of the calling module) on a fresh database of
/// each backend; PostgreSQL's cases pass without running when no server is configured.
macro_rules! on_both_stores {
    ($($case:ident),* $(,)?) => {
        $crate::ops::testing::on_both_stores!(@on on_sqlite, sqlite; $($case),*);
        $crate::ops::testing::on_both_stores!(@on on_postgres, postgres; $($case),*);
    };
    (@on $module:ident, $fixture:ident; $($case:ident),*) => {
        mod $module {$(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let Some(fixture) = waymark_store_conformance::fixtures::$fixture().await else { return };
                super::$case(fixture.store.clone()).await;
                drop(fixture.store);
                fixture.dispose.await;
            }
        )*}
    };
}
pub(crate) use on_both_stores;

/// Starts workflow `id` (named `E`, on queue `q`) and has worker `A` claim it: epoch 1.
pub(crate) async fn running(s: &dyn Store, id: &str) {
    start(s, wf(id, "E", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "E", id, T).await;
}

/// A message `id` to workflow `to` on `topic`, with no idempotency key and no inbox limit.
pub(crate) fn message(id: &str, to: &str, topic: &str, payload: &str) -> waymark_store::NewMessage {
    waymark_store::NewMessage {
        message_id: id.to_string(),
        workflow_id: to.to_string(),
        topic: topic.to_string(),
        payload: payload.to_string(),
        idempotency_key: None,
        max_unread: 0,
    }
}
