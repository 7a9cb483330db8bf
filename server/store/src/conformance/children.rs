//! Child workflow cases: started with the parent's record of it, re-joined on replay, awaited.

use super::*;

fn child(id: &str) -> NewWorkflow {
    NewWorkflow {
        input: "7".into(),
        ..wf(id, "C", "q")
    }
}

pub async fn children_start_with_their_record_and_rejoin_on_replay(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("parent", "P", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "P", "parent", T).await;
    let f = fence("parent", 1);
    assert_eq!(
        s.start_child_step(&f, 0, child("parent/0"), T + 1).await.unwrap(),
        "parent/0"
    );
    let c = get(s, "parent/0").await;
    assert_eq!(
        (c.status, c.parent_workflow_id.as_deref(), c.input.as_str()),
        (WorkflowStatus::Enqueued, Some("parent"), "7")
    );
    // A replay re-joins the recorded child, even when it would derive another id.
    assert_eq!(
        s.start_child_step(&f, 0, child("parent/other"), T + 2).await.unwrap(),
        "parent/0"
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
        s.start_child_step(&f, 1, taken, T + 3).await,
        Err(StoreError::WorkflowIdConflict { .. })
    ));
    assert_eq!(s.list_steps("parent").await.unwrap().len(), 1);
    // Awaiting: nothing while the child runs, its outcome once finished, recorded for replays.
    assert_eq!(s.await_child_step(&f, 1, "parent/0", T + 4).await.unwrap(), None);
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
        s.await_child_step(&f, 1, "parent/0", T + 7).await.unwrap(),
        Some(done.clone())
    );
    assert_eq!(s.await_child_step(&f, 1, "parent/0", T + 8).await.unwrap(), Some(done));
    assert!(matches!(
        s.await_child_step(&f, 2, "nobody", T + 9).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    // Fenced like every step.
    assert!(matches!(
        s.start_child_step(&fence("parent", 9), 3, child("x"), T).await,
        Err(StoreError::StaleEpoch { .. })
    ));
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
    s.start_child_step(&f, 0, late, T + 1).await.unwrap();
    s.start_child_step(&f, 1, early, T + 1).await.unwrap();
    s.start_child_step(&f, 2, child("parent/none"), T + 1).await.unwrap();
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
