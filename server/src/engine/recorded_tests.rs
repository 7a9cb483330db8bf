//! The durable operations the engine composes from the store's table operations
//! (`recorded.rs`), each case run against SQLite and PostgreSQL: written, recorded as the
//! workflow's step, answered from the record on replay, fenced, and refused as non-determinism
//! when another step is recorded at its position. (These were store conformance cases while
//! the store composed them.)

use std::sync::Arc;

use waymark_store::*;
use waymark_store_conformance::{claim_one, fence, get, session, start, step, wf, T};

use super::recorded;

/// Runs each case on a fresh database of each backend.
macro_rules! on_both_stores {
    ($($case:ident),* $(,)?) => {
        on_both_stores!(@on on_sqlite, sqlite; $($case),*);
        on_both_stores!(@on on_postgres, postgres; $($case),*);
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

on_both_stores!(
    set_event_keeps_value_history_and_step,
    set_event_is_fenced,
    get_event_step_waits_then_records,
    streams_append_in_order_and_close,
    children_start_with_their_record_and_rejoin_on_replay,
);

async fn running(s: &dyn Store, id: &str) {
    start(s, wf(id, "E", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "E", id, T).await;
}

async fn set_event_keeps_value_history_and_step(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "e").await;
    let f = fence("e", 1);
    assert_eq!(s.get_event("e", "status").await.unwrap(), None);
    recorded::set_event(s, &f, 0, "status", r#""waiting""#, T + 1)
        .await
        .unwrap();
    recorded::set_event(s, &f, 1, "status", r#""approved""#, T + 2)
        .await
        .unwrap();
    recorded::set_event(s, &f, 2, "other", "1", T + 3).await.unwrap();
    // A replay of a recorded set changes nothing.
    recorded::set_event(s, &f, 0, "status", r#""waiting""#, T + 4)
        .await
        .unwrap();
    assert_eq!(
        s.get_event("e", "status").await.unwrap().as_deref(),
        Some(r#""approved""#)
    );
    // Each set went into the history once, with the step that set it (the replay added none).
    let history: Vec<(String, u32)> = s
        .list_events("e")
        .await
        .unwrap()
        .into_iter()
        .flat_map(|e| e.history)
        .map(|h| (h.value, h.step_id))
        .collect();
    assert_eq!(
        history,
        [
            ("1".to_string(), 2),
            (r#""waiting""#.into(), 0),
            (r#""approved""#.into(), 1)
        ]
    );
    let steps = s.list_steps("e").await.unwrap();
    assert_eq!(
        steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        [SET_EVENT_STEP, SET_EVENT_STEP, SET_EVENT_STEP]
    );
    // Another kind of step at a recorded set is non-determinism.
    s.record_step(&f, step(3, "plain", "1"), T + 6).await.unwrap();
    assert!(matches!(
        recorded::set_event(s, &f, 3, "x", "1", T + 7).await,
        Err(StoreError::NonDeterminism { .. })
    ));
}

async fn set_event_is_fenced(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "e").await;
    let e = recorded::set_event(s, &fence("e", 9), 0, "k", "1", T)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::StaleEpoch { .. }));
    assert_eq!(s.get_event("e", "k").await.unwrap(), None);
    assert!(s.list_events("e").await.unwrap().is_empty());
}

async fn get_event_step_waits_then_records(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "reader").await;
    running(s, "writer").await;
    let r = fence("reader", 1);
    let later = T + 60_000;
    assert_eq!(
        recorded::get_event(s, &r, 0, "writer", "k", later, T + 1)
            .await
            .unwrap(),
        Received::Waiting
    );
    assert!(s.events_set(&[("writer".into(), "k".into())]).await.unwrap().is_empty());
    recorded::set_event(s, &fence("writer", 1), 0, "k", r#"{"v":1}"#, T + 2)
        .await
        .unwrap();
    assert_eq!(
        s.events_set(&[("writer".into(), "k".into()), ("writer".into(), "z".into())])
            .await
            .unwrap(),
        [("writer".to_string(), "k".to_string())]
    );
    assert_eq!(
        recorded::get_event(s, &r, 0, "writer", "k", later, T + 3)
            .await
            .unwrap(),
        Received::Delivered(r#"{"v":1}"#.into())
    );
    // Recorded: a later set does not change what the replay reads.
    recorded::set_event(s, &fence("writer", 1), 1, "k", "2", T + 4)
        .await
        .unwrap();
    assert_eq!(
        recorded::get_event(s, &r, 0, "writer", "k", later, T + 5)
            .await
            .unwrap(),
        Received::Delivered(r#"{"v":1}"#.into())
    );
    // Timeouts are recorded too.
    assert_eq!(
        recorded::get_event(s, &r, 1, "writer", "never", T + 6, T + 6)
            .await
            .unwrap(),
        Received::TimedOut
    );
    assert_eq!(
        recorded::get_event(s, &r, 1, "writer", "never", later, T + 7)
            .await
            .unwrap(),
        Received::TimedOut
    );
    assert!(matches!(
        recorded::get_event(s, &r, 2, "nobody", "k", later, T + 8).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}

async fn streams_append_in_order_and_close(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("st", "S", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "S", "st", T).await;
    let f = fence("st", 1);
    assert!(s.read_stream("st", "log", 0, 10).await.unwrap().is_empty());
    assert_eq!(
        recorded::write_stream(s, &f, 0, "log", Some(r#""a""#), T + 1)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        recorded::write_stream(s, &f, 1, "log", Some(r#""b""#), T + 2)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        recorded::write_stream(s, &f, 2, "other", Some("1"), T + 3)
            .await
            .unwrap(),
        0,
        "offsets are per key"
    );
    // A replay writes nothing more and returns the recorded offset.
    assert_eq!(
        recorded::write_stream(s, &f, 1, "log", Some(r#""b""#), T + 4)
            .await
            .unwrap(),
        1
    );
    assert_eq!(recorded::write_stream(s, &f, 3, "log", None, T + 5).await.unwrap(), 2);
    let all = s.read_stream("st", "log", 0, 10).await.unwrap();
    let entries: Vec<(u64, Option<&str>, bool)> =
        all.iter().map(|e| (e.offset, e.value.as_deref(), e.closed)).collect();
    assert_eq!(
        entries,
        [(0, Some(r#""a""#), false), (1, Some(r#""b""#), false), (2, None, true)]
    );
    let names: Vec<String> = s.list_steps("st").await.unwrap().into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            WRITE_STREAM_STEP,
            WRITE_STREAM_STEP,
            WRITE_STREAM_STEP,
            CLOSE_STREAM_STEP
        ]
    );
    // Fenced, and unknown workflows are not found.
    assert!(matches!(
        recorded::write_stream(s, &fence("st", 5), 4, "log", Some("1"), T).await,
        Err(StoreError::StaleEpoch { .. })
    ));
    assert!(matches!(
        s.read_stream("nobody", "log", 0, 10).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    // A different step at a recorded write is non-determinism.
    assert!(matches!(
        recorded::write_stream(s, &f, 3, "log", Some("1"), T + 6).await,
        Err(StoreError::NonDeterminism { .. })
    ));
}

fn child(id: &str) -> NewWorkflow {
    NewWorkflow {
        input: "7".into(),
        ..wf(id, "C", "q")
    }
}

async fn children_start_with_their_record_and_rejoin_on_replay(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("parent", "P", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "P", "parent", T).await;
    let f = fence("parent", 1);
    assert_eq!(
        recorded::start_child(s, &f, 0, child("parent/0"), T + 1).await.unwrap(),
        ("parent/0".to_string(), true)
    );
    let c = get(s, "parent/0").await;
    assert_eq!(
        (c.status, c.parent_workflow_id.as_deref(), c.input.as_str()),
        (WorkflowStatus::Enqueued, Some("parent"), "7")
    );
    // A replay re-joins the recorded child, even when it would derive another id.
    assert_eq!(
        recorded::start_child(s, &f, 0, child("parent/other"), T + 2)
            .await
            .unwrap(),
        ("parent/0".to_string(), false)
    );
    assert!(
        s.get_workflow("parent/other").await.unwrap().is_none(),
        "no second child"
    );
    assert_eq!(s.children("parent").await.unwrap(), ["parent/0"]);
    // An id used by another kind of workflow is a conflict, and nothing is recorded.
    let taken = NewWorkflow {
        workflow_name: "Other".into(),
        ..child("parent")
    };
    assert!(matches!(
        recorded::start_child(s, &f, 1, taken, T + 3).await,
        Err(StoreError::WorkflowIdConflict { .. })
    ));
    assert_eq!(s.list_steps("parent").await.unwrap().len(), 1);
    // Awaiting: nothing while the child runs, its outcome once finished, recorded for replays.
    assert_eq!(recorded::await_child(s, &f, 1, "parent/0", T + 4).await.unwrap(), None);
    assert!(s.finished_among(&["parent/0".into()]).await.unwrap().is_empty());
    claim_one(s, "A", "C", "parent/0", T + 5).await;
    s.complete_workflow(&fence("parent/0", 1), Outcome::Output("49".into()), T + 6)
        .await
        .unwrap();
    assert_eq!(
        s.finished_among(&["parent/0".into(), "parent".into()]).await.unwrap(),
        ["parent/0"]
    );
    let done = ChildOutcome {
        status: WorkflowStatus::Success,
        output: Some("49".into()),
        failure: None,
    };
    assert_eq!(
        recorded::await_child(s, &f, 1, "parent/0", T + 7).await.unwrap(),
        Some(done.clone())
    );
    assert_eq!(
        recorded::await_child(s, &f, 1, "parent/0", T + 8).await.unwrap(),
        Some(done)
    );
    assert!(matches!(
        recorded::await_child(s, &f, 2, "nobody", T + 9).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    // Fenced like every step.
    assert!(matches!(
        recorded::start_child(s, &fence("parent", 9), 3, child("x"), T).await,
        Err(StoreError::StaleEpoch { .. })
    ));
}
