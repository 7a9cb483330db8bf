//! Transaction cases: the table operations the engine composes durable operations from. A
//! transaction's writes are seen only once it commits; its fence refuses a write from another
//! dispatch and finds a recorded step; a child is inserted once.

use super::*;

async fn running(s: &dyn Store, id: &str) -> Fence {
    start(s, wf(id, "X", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    let epoch = claim_one(s, "A", "X", id, T).await;
    fence(id, epoch)
}

pub async fn transactions_write_only_when_committed(s: Arc<dyn Store>) {
    let s = &*s;
    let f = running(s, "t").await;
    // Dropped without a commit: nothing of it stays.
    {
        let mut tx = s.begin(T + 1).await.unwrap();
        assert_eq!(tx.fence(&f, 0, FenceLock::Shared).await.unwrap(), None);
        tx.set_event("t", "k", "1", 0).await.unwrap();
        tx.append_stream("t", "log", Some("1")).await.unwrap();
        assert!(tx.record_step(&f, 0, SET_EVENT_STEP, r#"{"key":"k"}"#).await.unwrap());
        assert_eq!(tx.event("t", "k").await.unwrap().as_deref(), Some("1"), "seen inside");
    }
    assert_eq!(s.get_event("t", "k").await.unwrap(), None);
    assert!(s.read_stream("t", "log", 0, 10).await.unwrap().is_empty());
    assert!(s.list_steps("t").await.unwrap().is_empty());
    // Committed: all of it, recorded at the transaction's time.
    let mut tx = s.begin(T + 2).await.unwrap();
    assert_eq!(tx.fence(&f, 0, FenceLock::Alone).await.unwrap(), None);
    tx.set_event("t", "k", "2", 0).await.unwrap();
    assert_eq!(tx.append_stream("t", "log", Some("2")).await.unwrap(), 0);
    assert!(tx.record_step(&f, 0, SET_EVENT_STEP, r#"{"key":"k"}"#).await.unwrap());
    tx.commit(Vec::new()).await.unwrap();
    assert_eq!(s.get_event("t", "k").await.unwrap().as_deref(), Some("2"));
    assert_eq!(s.read_stream("t", "log", 0, 10).await.unwrap().len(), 1);
    let steps = s.list_steps("t").await.unwrap();
    assert_eq!(
        steps
            .iter()
            .map(|st| (st.step_id, st.name.as_str(), st.epoch, st.recorded_at))
            .collect::<Vec<_>>(),
        [(0, SET_EVENT_STEP, 1, T + 2)]
    );
}

pub async fn transactions_fence_and_detect_replays(s: Arc<dyn Store>) {
    let s = &*s;
    let f = running(s, "t").await;
    let mut tx = s.begin(T + 1).await.unwrap();
    assert!(tx.record_step(&f, 0, "plain", "1").await.unwrap());
    // The same step again, from a request that raced this one: not written twice.
    assert!(!tx.record_step(&f, 0, "plain", "2").await.unwrap());
    tx.commit(Vec::new()).await.unwrap();
    // A recorded step is found by the fence, with either lock.
    for lock in [FenceLock::Shared, FenceLock::Alone] {
        let mut tx = s.begin(T + 2).await.unwrap();
        let done = tx.fence(&f, 0, lock).await.unwrap().expect("recorded");
        assert_eq!(
            (done.name.as_str(), &done.outcome),
            ("plain", &Outcome::Output("1".into()))
        );
        assert_eq!(tx.fence(&f, 1, lock).await.unwrap(), None);
    }
    // Another dispatch's write is refused, and so is one for a workflow that is not running.
    let mut tx = s.begin(T + 3).await.unwrap();
    assert!(matches!(
        tx.fence(&fence("t", 9), 1, FenceLock::Shared).await,
        Err(StoreError::StaleEpoch { .. })
    ));
    drop(tx);
    let mut tx = s.begin(T + 3).await.unwrap();
    assert!(matches!(
        tx.fence(&fence("nobody", 1), 0, FenceLock::Shared).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    drop(tx);
    s.cancel_workflow("t", T + 4).await.unwrap();
    let mut tx = s.begin(T + 5).await.unwrap();
    assert!(matches!(
        tx.fence(&f, 1, FenceLock::Alone).await,
        Err(StoreError::NotRunning { .. })
    ));
}

pub async fn transactions_insert_children_once(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "p").await;
    let child = NewWorkflow {
        input: "7".into(),
        ..wf("p/0", "C", "q")
    };
    let mut tx = s.begin(T + 1).await.unwrap();
    assert!(tx.insert_child("p", &child).await.unwrap());
    assert!(!tx.insert_child("p", &child).await.unwrap(), "its id is taken now");
    let c = tx.workflow("p/0").await.unwrap().expect("inserted");
    assert_eq!(
        (
            c.status,
            c.parent_workflow_id.as_deref(),
            c.input.as_str(),
            c.created_at
        ),
        (WorkflowStatus::Enqueued, Some("p"), "7", T + 1)
    );
    tx.commit(Vec::new()).await.unwrap();
    assert_eq!(s.children("p").await.unwrap(), ["p/0"]);
    assert!(s.children("p/0").await.unwrap().is_empty());
}
