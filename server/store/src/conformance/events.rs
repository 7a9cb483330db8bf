//! Event cases: set writes value, history and step together; reads; recorded reads; fencing.

use super::*;

async fn running(s: &dyn Store, id: &str) {
    start(s, wf(id, "E", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "E", id, T).await;
}

pub async fn set_event_keeps_value_history_and_step(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "e").await;
    let f = fence("e", 1);
    assert_eq!(s.get_event("e", "status").await.unwrap(), None);
    s.set_event_step(&f, 0, "status", r#""waiting""#, T + 1).await.unwrap();
    s.set_event_step(&f, 1, "status", r#""approved""#, T + 2).await.unwrap();
    s.set_event_step(&f, 2, "other", "1", T + 3).await.unwrap();
    // A replay of a recorded set changes nothing.
    s.set_event_step(&f, 0, "status", r#""waiting""#, T + 4).await.unwrap();
    assert_eq!(
        s.get_event("e", "status").await.unwrap().as_deref(),
        Some(r#""approved""#)
    );
    let events = s.list_events("e").await.unwrap();
    assert_eq!(
        events.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
        ["other", "status"]
    );
    let status = &events[1];
    assert_eq!((status.value.as_str(), status.updated_at), (r#""approved""#, T + 2));
    let history: Vec<(&str, u32)> = status.history.iter().map(|h| (h.value.as_str(), h.step_id)).collect();
    assert_eq!(history, [(r#""waiting""#, 0), (r#""approved""#, 1)]);
    let steps = s.list_steps("e").await.unwrap();
    assert_eq!(
        steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        [SET_EVENT_STEP, SET_EVENT_STEP, SET_EVENT_STEP]
    );
    // Another kind of step at a recorded set is non-determinism.
    s.record_step(&f, step(3, "plain", "1"), T + 6).await.unwrap();
    assert!(matches!(
        s.set_event_step(&f, 3, "x", "1", T + 7).await,
        Err(StoreError::NonDeterminism { .. })
    ));
    assert!(matches!(
        s.get_event("nobody", "k").await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    assert!(matches!(
        s.list_events("nobody").await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}

pub async fn set_event_is_fenced(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "e").await;
    let e = s.set_event_step(&fence("e", 9), 0, "k", "1", T).await.unwrap_err();
    assert!(matches!(e, StoreError::StaleEpoch { .. }));
    assert_eq!(s.get_event("e", "k").await.unwrap(), None);
    assert!(s.list_events("e").await.unwrap().is_empty());
}

pub async fn get_event_step_waits_then_records(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "reader").await;
    running(s, "writer").await;
    let r = fence("reader", 1);
    let later = T + 60_000;
    assert_eq!(
        s.get_event_step(&r, 0, "writer", "k", later, T + 1).await.unwrap(),
        Received::Waiting
    );
    assert!(s.events_set(&[("writer".into(), "k".into())]).await.unwrap().is_empty());
    s.set_event_step(&fence("writer", 1), 0, "k", r#"{"v":1}"#, T + 2)
        .await
        .unwrap();
    assert_eq!(
        s.events_set(&[("writer".into(), "k".into()), ("writer".into(), "z".into())])
            .await
            .unwrap(),
        [("writer".to_string(), "k".to_string())]
    );
    assert_eq!(
        s.get_event_step(&r, 0, "writer", "k", later, T + 3).await.unwrap(),
        Received::Delivered(r#"{"v":1}"#.into())
    );
    // Recorded: a later set does not change what the replay reads.
    s.set_event_step(&fence("writer", 1), 1, "k", "2", T + 4).await.unwrap();
    assert_eq!(
        s.get_event_step(&r, 0, "writer", "k", later, T + 5).await.unwrap(),
        Received::Delivered(r#"{"v":1}"#.into())
    );
    // Timeouts are recorded too.
    assert_eq!(
        s.get_event_step(&r, 1, "writer", "never", T + 6, T + 6).await.unwrap(),
        Received::TimedOut
    );
    assert_eq!(
        s.get_event_step(&r, 1, "writer", "never", later, T + 7).await.unwrap(),
        Received::TimedOut
    );
    assert!(matches!(
        s.get_event_step(&r, 2, "nobody", "k", later, T + 8).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}
