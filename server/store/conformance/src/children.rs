//! Child workflow cases: deadlines, which children inherit from their parent. (Starting and
//! awaiting children as a workflow's steps are composed by the engine; their cases are in the
//! engine's tests, on both backends.)

use super::*;

fn child(id: &str) -> NewWorkflow {
    NewWorkflow {
        input: "7".into(),
        ..wf(id, "C", "q")
    }
}

/// Deadlines: past one, unfinished workflows are cancelled; children inherit the earlier of
/// their own deadline and their parent's.
pub async fn deadlines_cancel_and_children_inherit_them(s: Arc<dyn Store>) {
    let s = &*s;
    let with_deadline = |id: &str, at: Option<Millis>| NewWorkflow {
        deadline_at: at,
        ..wf(id, "P", "q")
    };
    start(s, with_deadline("parent", Some(T + 1_000)), T).await;
    start(s, with_deadline("loose", None), T).await;
    start(s, with_deadline("done", Some(T + 10)), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    let got = s.claim_workflows(&claim("A", &["P"], &["q"], 10), T).await.unwrap();
    assert_eq!(got.len(), 3);
    s.complete_workflow(&fence("done", 1), Outcome::Output("1".into()), T + 5)
        .await
        .unwrap();
    let f = fence("parent", 1);
    let late = NewWorkflow {
        deadline_at: Some(T + 5_000),
        ..child("parent/late")
    };
    let early = NewWorkflow {
        deadline_at: Some(T + 500),
        ..child("parent/early")
    };
    let mut tx = s.begin(T + 1).await.unwrap();
    tx.fence(&f, 0, FenceLock::Shared).await.unwrap();
    for c in [late, early, child("parent/none")] {
        assert!(tx.insert_child("parent", &c).await.unwrap());
    }
    tx.commit(Vec::new()).await.unwrap();
    assert_eq!(
        get(s, "parent/late").await.deadline_at,
        Some(T + 1_000),
        "capped by the parent's"
    );
    assert_eq!(
        get(s, "parent/early").await.deadline_at,
        Some(T + 500),
        "its own, earlier"
    );
    assert_eq!(get(s, "parent/none").await.deadline_at, Some(T + 1_000), "inherited");
    assert!(s.cancel_expired(T + 400).await.unwrap().is_empty());
    let first: Vec<String> = s
        .cancel_expired(T + 600)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.workflow_id)
        .collect();
    assert_eq!(first, ["parent/early"]);
    let mut second: Vec<String> = s
        .cancel_expired(T + 1_001)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.workflow_id)
        .collect();
    second.sort();
    assert_eq!(second, ["parent", "parent/late", "parent/none"]);
    assert_eq!(get(s, "parent").await.status, WorkflowStatus::Cancelled);
    assert_eq!(get(s, "loose").await.status, WorkflowStatus::Pending);
    assert_eq!(
        get(s, "done").await.status,
        WorkflowStatus::Success,
        "finished workflows keep their outcome"
    );
}
