//! Deleting finished workflows: everything recorded for them goes, nothing else does, and a
//! workflow that is still going (or whose parent is) is never deleted.

use super::*;

/// A workflow with something of every kind recorded for it: a step, a message to it, an event,
/// a stream value, a queued remote-step call, and (for "tree") a child.
async fn with_records(s: &dyn Store, id: &str, now: Millis) -> u64 {
    start(s, wf(id, "W", "q"), now).await;
    let epoch = claim_one(s, "k", "W", id, now + 1).await;
    s.record_step(&fence(id, epoch), step(0, "s0", "0"), now + 2)
        .await
        .unwrap();
    let message = NewMessage {
        message_id: format!("{id}-m"),
        workflow_id: id.into(),
        topic: String::new(),
        payload: "1".into(),
        idempotency_key: None,
        max_unread: 0,
    };
    s.send_message(message, now + 2).await.unwrap();
    let mut tx = s.begin(now + 3).await.unwrap();
    tx.set_event(id, "k", "7", 1).await.unwrap();
    tx.append_stream(id, "out", Some("\"v\"")).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();
    let call = NewStepTask {
        step_name: "remote".into(),
        input: "1".into(),
        policy: StepPolicy {
            max_attempts: 1,
            initial_backoff_ms: 0,
            backoff_coefficient: 2.0,
            max_backoff_ms: 0,
            timeout_ms: 1_000,
        },
        trace: None,
    };
    s.call_step(&fence(id, epoch), 2, &call, now + 3).await.unwrap();
    epoch
}

async fn finish(s: &dyn Store, id: &str, epoch: u64, now: Millis) {
    s.complete_workflow(&fence(id, epoch), Outcome::Output("1".into()), now)
        .await
        .unwrap();
}

/// Whether `id` is gone with everything recorded for it. The lists of a missing workflow are
/// refused, so a workflow of the same id is started to read them through: rows the delete left
/// behind would show as its own. It is deleted again before the answer.
async fn gone(s: &dyn Store, id: &str) -> bool {
    if s.get_workflow(id).await.unwrap().is_some() {
        return false;
    }
    start(s, wf(id, "W", "q"), T).await;
    let empty = s.list_steps(id).await.unwrap().is_empty()
        && s.list_messages(id).await.unwrap().is_empty()
        && s.list_events(id).await.unwrap().is_empty()
        && s.read_stream(id, "out", 0, 10).await.unwrap().is_empty()
        && s.step_call(id, 2).await.unwrap().is_none();
    s.cancel_workflow(id, T).await.unwrap();
    s.delete_workflow(id, false).await.unwrap();
    empty
}

pub async fn deleting_a_finished_workflow_removes_everything_recorded_for_it(s: Arc<dyn Store>) {
    let s = &*s;
    let a = with_records(s, "a", T).await;
    let b = with_records(s, "b", T).await;
    assert!(
        s.step_call("a", 2).await.unwrap().is_some(),
        "the fixture queued a call"
    );

    // Running: refused, and nothing is touched.
    match s.delete_workflow("a", false).await {
        Err(StoreError::NotFinished { workflow_id, status }) => {
            assert_eq!((workflow_id.as_str(), status), ("a", WorkflowStatus::Pending))
        }
        other => panic!("{other:?}"),
    }
    assert!(!gone(s, "a").await);

    finish(s, "a", a, T + 10).await;
    assert_eq!(s.delete_workflow("a", false).await.unwrap(), ["a"]);
    assert!(gone(s, "a").await, "every record of a is gone");
    assert!(!gone(s, "b").await, "b's records stay");
    assert!(matches!(
        s.delete_workflow("a", false).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    finish(s, "b", b, T + 11).await;
    let cancelled = start(s, wf("c", "W", "q"), T).await;
    s.cancel_workflow(&cancelled.workflow_id, T + 12).await.unwrap();
    assert_eq!(
        s.delete_workflow("c", false).await.unwrap(),
        ["c"],
        "cancelled counts as finished"
    );
}

pub async fn deleting_a_tree_takes_every_descendant_only_once_all_have_finished(s: Arc<dyn Store>) {
    let s = &*s;
    let root = with_records(s, "root", T).await;
    let mut tx = s.begin(T + 4).await.unwrap();
    for child in ["root/0", "root/1"] {
        assert!(tx.insert_child("root", &wf(child, "C", "q")).await.unwrap());
    }
    tx.commit(Vec::new()).await.unwrap();
    let mut tx = s.begin(T + 5).await.unwrap();
    assert!(tx.insert_child("root/0", &wf("root/0/0", "C", "q")).await.unwrap());
    tx.commit(Vec::new()).await.unwrap();
    start(s, wf("other", "C", "q"), T).await;

    // A child whose parent is still going stays: the parent may await it.
    s.cancel_workflow("root/1", T + 6).await.unwrap();
    assert!(matches!(
        s.delete_workflow("root/1", false).await,
        Err(StoreError::ParentNotFinished { .. })
    ));
    finish(s, "root", root, T + 7).await;
    // A descendant still going holds the whole tree back.
    match s.delete_workflow("root", true).await {
        Err(StoreError::NotFinished { workflow_id, .. }) => {
            assert!(workflow_id == "root/0" || workflow_id == "root/0/0", "{workflow_id}")
        }
        other => panic!("{other:?}"),
    }
    assert!(!gone(s, "root").await, "a refused cascade deletes nothing");
    for id in ["root/0", "root/0/0"] {
        s.cancel_workflow(id, T + 8).await.unwrap();
    }
    let mut deleted = s.delete_workflow("root", true).await.unwrap();
    deleted.sort();
    assert_eq!(deleted, ["root", "root/0", "root/0/0", "root/1"]);
    for id in &deleted {
        assert!(gone(s, id).await, "{id}");
    }
    assert!(
        s.get_workflow("other").await.unwrap().is_some(),
        "outside the tree stays"
    );

    // Without cascade the children stay, their parent gone.
    let p = with_records(s, "p", T + 20).await;
    let mut tx = s.begin(T + 21).await.unwrap();
    assert!(tx.insert_child("p", &wf("p/0", "C", "q")).await.unwrap());
    tx.commit(Vec::new()).await.unwrap();
    finish(s, "p", p, T + 22).await;
    assert_eq!(s.delete_workflow("p", false).await.unwrap(), ["p"]);
    assert_eq!(get(s, "p/0").await.parent_workflow_id.as_deref(), Some("p"));
}

pub async fn a_cascade_over_the_bound_is_refused(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("big", "W", "q"), T).await;
    s.cancel_workflow("big", T + 1).await.unwrap();
    // The bound plus one children, inserted in a few transactions.
    let children: Vec<String> = (0..MAX_DELETE).map(|i| format!("big/{i}")).collect();
    for chunk in children.chunks(2_500) {
        let mut tx = s.begin(T + 2).await.unwrap();
        for id in chunk {
            tx.insert_child("big", &wf(id, "C", "q")).await.unwrap();
        }
        tx.commit(Vec::new()).await.unwrap();
    }
    assert!(matches!(
        s.delete_workflow("big", true).await,
        Err(StoreError::TooManyToDelete { limit: MAX_DELETE, .. })
    ));
    assert!(s.get_workflow("big").await.unwrap().is_some(), "nothing deleted");
}

/// Finishes `id` (started on `queue`) as `status` at `at`.
async fn ended(s: &dyn Store, id: &str, queue: &str, status: WorkflowStatus, at: Millis) {
    start(s, wf(id, "W", queue), T).await;
    if status == WorkflowStatus::Cancelled {
        s.cancel_workflow(id, at).await.unwrap();
        return;
    }
    let got = s
        .claim_workflows(&claim(&format!("k-{id}"), &["W"], &[queue], 1), at)
        .await
        .unwrap();
    assert_eq!(ids(&got), [id]);
    let epoch = got[0].workflow.epoch;
    let outcome = match status {
        WorkflowStatus::Success => Outcome::Output("1".into()),
        _ => failure("Boom"),
    };
    s.complete_workflow(&fence(id, epoch), outcome, at).await.unwrap();
}

fn covered(queues: &[&str], statuses: &[WorkflowStatus]) -> Covered {
    Covered {
        queues: queues.iter().map(|q| q.to_string()).collect(),
        statuses: statuses.to_vec(),
    }
}

pub async fn the_collector_deletes_what_a_rule_covers_oldest_first_in_batches(s: Arc<dyn Store>) {
    let s = &*s;
    use WorkflowStatus::*;
    ended(s, "old-ok", "q", Success, T + 10).await;
    ended(s, "old-err", "q", Error, T + 11).await;
    ended(s, "old-cancelled", "q", Cancelled, T + 12).await;
    ended(s, "old-pay", "pay", Success, T + 13).await;
    ended(s, "new-ok", "q", Success, T + 1_000).await;
    start(s, wf("running", "W", "q"), T).await;
    // A finished child whose parent runs stays; its sibling under a finished parent goes.
    let mut tx = s.begin(T + 1).await.unwrap();
    tx.insert_child("running", &wf("running/0", "C", "q")).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();
    s.cancel_workflow("running/0", T + 14).await.unwrap();

    let batch = |covered: Covered, except: Vec<Covered>, limit: u32| Collect {
        covered,
        except,
        finished_before: T + 500,
        limit,
    };
    // Errors are kept by an earlier rule; the default covers the rest, two at a time.
    let keep_errors = vec![covered(&[], &[Error])];
    let first = s
        .collect_finished(&batch(Covered::default(), keep_errors.clone(), 2))
        .await
        .unwrap();
    assert_eq!(
        first,
        Some(vec!["old-ok".to_string(), "old-cancelled".to_string()]),
        "oldest first"
    );
    let second = s
        .collect_finished(&batch(Covered::default(), keep_errors.clone(), 2))
        .await
        .unwrap();
    assert_eq!(second, Some(vec!["old-pay".to_string()]));
    let third = s
        .collect_finished(&batch(Covered::default(), keep_errors, 2))
        .await
        .unwrap();
    assert_eq!(
        third,
        Some(vec![]),
        "what is left is kept, newer, running, or a running parent's"
    );
    for id in ["old-err", "new-ok", "running", "running/0"] {
        assert!(s.get_workflow(id).await.unwrap().is_some(), "{id} stays");
    }
    // A rule of its own for a queue and a status.
    ended(s, "pay-err", "pay", Error, T + 20).await;
    let pay_errors = batch(covered(&["pay"], &[Error]), vec![], 10);
    assert_eq!(
        s.collect_finished(&pay_errors).await.unwrap(),
        Some(vec!["pay-err".to_string()])
    );
    assert!(
        s.get_workflow("old-err").await.unwrap().is_some(),
        "another queue's error stays"
    );
    // What goes, goes with its records.
    assert!(gone(s, "old-ok").await);
}

pub(super) fn fork(source: &str, from_step: Option<u32>, id: &str) -> Fork {
    Fork {
        source: source.into(),
        from_step,
        new_workflow_id: id.into(),
        app_version: None,
        queue_name: None,
    }
}

async fn step_names(s: &dyn Store, id: &str) -> Vec<String> {
    s.list_steps(id).await.unwrap().into_iter().map(|st| st.name).collect()
}

pub async fn a_fork_copies_the_history_before_its_step_and_records_its_lineage(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("src", "W", "q"), T).await;
    let e = claim_one(s, "k", "W", "src", T + 1).await;
    s.record_step(&fence("src", e), step(0, "a", "1"), T + 2).await.unwrap();
    s.record_step(&fence("src", e), step(1, "b", "2"), T + 3).await.unwrap();
    // Step 2 sets an event and writes a stream value; step 4 sets the event again.
    let mut tx = s.begin(T + 4).await.unwrap();
    tx.set_event("src", "k", "\"v1\"", 2).await.unwrap();
    tx.append_stream("src", "out", Some("\"x\"")).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();
    s.record_step(&fence("src", e), step(2, "c", "3"), T + 4).await.unwrap();
    s.record_step(&fence("src", e), step(3, "d", "4"), T + 5).await.unwrap();
    let mut tx = s.begin(T + 6).await.unwrap();
    tx.set_event("src", "k", "\"v2\"", 4).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();
    let set = step(4, "waymark.set_event", r#"{"key":"k"}"#);
    s.record_step(&fence("src", e), set, T + 6).await.unwrap();
    s.complete_workflow(&fence("src", e), failure("Bug"), T + 7)
        .await
        .unwrap();

    // From step 2: the first two steps, nothing of the event or the stream.
    let f = s.fork_workflow(&fork("src", Some(2), "f2"), T + 10).await.unwrap();
    assert_eq!(
        (f.status, f.workflow_name.as_str(), f.input.as_str(), f.epoch),
        (WorkflowStatus::Enqueued, "W", r#"{"id":"src"}"#, 0)
    );
    assert_eq!(
        f.forked_from,
        Some(Lineage {
            workflow_id: "src".into(),
            from_step: 2
        })
    );
    assert_eq!(step_names(s, "f2").await, ["a", "b"]);
    assert!(s.list_events("f2").await.unwrap().is_empty());
    assert!(s.read_stream("f2", "out", 0, 10).await.unwrap().is_empty());
    // From step 3: the event as it was then (not its later value), the stream value.
    s.fork_workflow(&fork("src", Some(3), "f3"), T + 10).await.unwrap();
    assert_eq!(step_names(s, "f3").await, ["a", "b", "c"]);
    assert_eq!(s.get_event("f3", "k").await.unwrap().as_deref(), Some("\"v1\""));
    let values: Vec<_> = s
        .read_stream("f3", "out", 0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.value)
        .collect();
    assert_eq!(values, [Some("\"x\"".to_string())]);
    // Its first dispatch carries the copied steps, to replay.
    let got = s
        .claim_workflows(&claim("k2", &["W"], &["q"], 10), T + 10)
        .await
        .unwrap();
    let f3 = got.iter().find(|c| c.workflow.workflow_id == "f3").expect("f3 claimed");
    assert_eq!((f3.workflow.epoch, f3.steps.len()), (1, 3));
    // All of it, on another version: it replays everything and goes on from the end.
    let all = Fork {
        app_version: Some("v2".into()),
        ..fork("src", None, "fall")
    };
    let f = s.fork_workflow(&all, T + 10).await.unwrap();
    assert_eq!(
        (f.app_version.as_deref(), f.forked_from.unwrap().from_step),
        (Some("v2"), 5)
    );
    assert_eq!(step_names(s, "fall").await, ["a", "b", "c", "d", "waymark.set_event"]);
    assert_eq!(s.get_event("fall", "k").await.unwrap().as_deref(), Some("\"v2\""));
    // The source is untouched; the same fork again is the first one; other uses of the id clash.
    assert_eq!(step_names(s, "src").await.len(), 5);
    assert_eq!(
        s.fork_workflow(&fork("src", Some(2), "f2"), T + 11)
            .await
            .unwrap()
            .created_at,
        T + 10
    );
    assert!(matches!(
        s.fork_workflow(&fork("src", Some(2), "src"), T + 11).await,
        Err(StoreError::WorkflowIdConflict { .. })
    ));
    assert!(matches!(
        s.fork_workflow(&fork("ghost", None, "g"), T + 11).await,
        Err(StoreError::WorkflowNotFound(_))
    ));
    assert!(s.get_workflow("g").await.unwrap().is_none());
}

pub async fn resuming_an_error_reruns_its_failed_step(s: Arc<dyn Store>) {
    let s = &*s;
    // The last step failed: its record goes, the one before stays.
    start(s, wf("failed-step", "W", "q"), T).await;
    let e = claim_one(s, "k", "W", "failed-step", T + 1).await;
    s.record_step(&fence("failed-step", e), step(0, "a", "1"), T + 2)
        .await
        .unwrap();
    let broken = NewStep {
        outcome: failure("StepFailed"),
        ..step(1, "b", "")
    };
    s.record_step(&fence("failed-step", e), broken, T + 3).await.unwrap();
    s.complete_workflow(&fence("failed-step", e), failure("StepFailed"), T + 4)
        .await
        .unwrap();
    let w = s.resume_workflow("failed-step", T + 5).await.unwrap();
    assert_eq!(
        (w.status, w.outcome, w.recovery_attempts),
        (WorkflowStatus::Enqueued, None, 0)
    );
    assert_eq!(step_names(s, "failed-step").await, ["a"]);
    // The workflow's own code failed after its steps: they all stay, for fixed code to replay.
    start(s, wf("failed-code", "W", "q"), T).await;
    let e = claim_one(s, "k", "W", "failed-code", T + 6).await;
    s.record_step(&fence("failed-code", e), step(0, "a", "1"), T + 7)
        .await
        .unwrap();
    s.complete_workflow(&fence("failed-code", e), failure("Bug"), T + 8)
        .await
        .unwrap();
    s.resume_workflow("failed-code", T + 9).await.unwrap();
    assert_eq!(step_names(s, "failed-code").await, ["a"]);
}
