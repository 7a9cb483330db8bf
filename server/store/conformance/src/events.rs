//! Event cases: reads of what a transaction set — the current value, the history oldest first,
//! and which waits have theirs set. (Setting an event as a workflow's step is composed by the
//! engine; its cases are in the engine's tests, on both backends.)

use super::*;

/// Sets event `key` of `workflow_id` as its step `step_id`, committed.
pub async fn set_event(s: &dyn Store, workflow_id: &str, key: &str, value: &str, step_id: u32, now: Millis) {
    let mut tx = s.begin(now).await.unwrap();
    tx.set_event(workflow_id, key, value, step_id).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();
}

pub async fn events_are_read_back_with_their_history(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("e", "E", "q"), T).await;
    assert_eq!(s.get_event("e", "status").await.unwrap(), None);
    set_event(s, "e", "status", r#""waiting""#, 0, T + 1).await;
    set_event(s, "e", "status", r#""approved""#, 1, T + 2).await;
    set_event(s, "e", "other", "1", 2, T + 3).await;
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
    let history: Vec<(&str, u32, Millis)> = status
        .history
        .iter()
        .map(|h| (h.value.as_str(), h.step_id, h.set_at))
        .collect();
    assert_eq!(history, [(r#""waiting""#, 0, T + 1), (r#""approved""#, 1, T + 2)]);
    assert_eq!(
        s.events_set(&[("e".into(), "status".into()), ("e".into(), "z".into())])
            .await
            .unwrap(),
        [("e".to_string(), "status".to_string())]
    );
    assert!(s.events_set(&[]).await.unwrap().is_empty());
    assert!(matches!(
        s.get_event("nobody", "k").await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    assert!(matches!(
        s.list_events("nobody").await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}
