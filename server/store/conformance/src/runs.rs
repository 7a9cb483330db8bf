//! Continue-as-new: the run's history moves to its ended-run row, the workflow goes back to its
//! queue with a fresh history under its id, and the ended run's fence is refused afterwards.

use super::*;

pub async fn continuing_as_new_keeps_the_run_apart_and_enqueues_a_fresh_one(s: Arc<dyn Store>) {
    let s = &*s;
    start(s, wf("loop", "W", "q"), T).await;
    let epoch = claim_one(s, "k", "W", "loop", T + 1).await;
    let f = fence("loop", epoch);
    s.record_step(&f, step(0, "tick", "0"), T + 2).await.unwrap();
    // A message it read and one still unread; an event it set.
    for (i, topic) in ["read", "unread"].iter().enumerate() {
        let m = NewMessage {
            message_id: format!("m{i}"),
            workflow_id: "loop".into(),
            topic: topic.to_string(),
            payload: format!("{i}"),
            idempotency_key: None,
            max_unread: 0,
        };
        s.send_message(m, T + 2).await.unwrap();
    }
    assert_eq!(take(s, &f, 1, "read", T + 3).await.as_deref(), Some("0"));
    let mut tx = s.begin(T + 3).await.unwrap();
    tx.set_event("loop", "progress", "\"half\"", 2).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();

    let done = s.continue_as_new(&f, "{\"n\":1}", T + 4).await.unwrap();
    assert!(!done.adopted);
    assert_eq!(done.ended_run, "loop/run-0");
    let w = &done.workflow;
    assert_eq!(
        (w.status, w.run, w.epoch, w.input.as_str(), w.worker_id.as_deref()),
        (WorkflowStatus::Enqueued, 1, epoch + 1, "{\"n\":1}", None)
    );
    assert!(s.list_steps("loop").await.unwrap().is_empty(), "a fresh history");
    let ended = get(s, "loop/run-0").await;
    assert_eq!(
        (
            ended.status,
            ended.run,
            ended.continued_as.as_deref(),
            ended.input.as_str()
        ),
        (WorkflowStatus::ContinuedAsNew, 0, Some("loop"), "{\"id\":\"loop\"}")
    );
    let names: Vec<String> = s
        .list_steps("loop/run-0")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["tick", "waymark.recv"], "the run's steps moved with it");
    let history = s.list_events("loop/run-0").await;
    assert!(history.is_ok(), "the ended run is readable like any workflow");
    // The unread message and the event's value stay with the workflow; the read one went.
    let inbox: Vec<String> = s
        .list_messages("loop")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.topic)
        .collect();
    assert_eq!(inbox, ["unread"]);
    assert_eq!(s.list_messages("loop/run-0").await.unwrap().len(), 1);
    let events = s.list_events("loop").await.unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect::<Vec<_>>(),
        [("progress", "\"half\"")]
    );

    // The ended run's fence is refused from now on; the same request again is adopted.
    match s.record_step(&f, step(1, "late", "1"), T + 5).await {
        Err(StoreError::StaleEpoch { .. }) => {}
        other => panic!("a write of the ended run: {other:?}"),
    }
    let again = s.continue_as_new(&f, "{\"n\":1}", T + 5).await.unwrap();
    assert!(again.adopted && again.ended_run == "loop/run-0");
    assert_eq!(get(s, "loop").await.run, 1, "not continued twice");

    // The next run is claimed with an empty history, and ends the same way.
    let got = s.claim_workflows(&claim("k", &["W"], &["q"], 1), T + 6).await.unwrap();
    assert_eq!(ids(&got), ["loop"]);
    assert!(got[0].steps.is_empty());
    let f2 = fence("loop", got[0].workflow.epoch);
    s.record_step(&f2, step(0, "tick", "1"), T + 7).await.unwrap();
    assert_eq!(
        s.continue_as_new(&f2, "2", T + 8).await.unwrap().ended_run,
        "loop/run-1"
    );
    let runs = s
        .list_workflows(&ListQuery {
            statuses: vec![WorkflowStatus::ContinuedAsNew],
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(list_ids(&runs), ["loop/run-1", "loop/run-0"]);
    // A resend from a run before the last is refused, not adopted: the adoption looks up the
    // last ended run by its id only. Its worker lets go of the run either way.
    match s.continue_as_new(&f, "{\"n\":1}", T + 9).await {
        Err(StoreError::StaleEpoch { .. } | StoreError::NotRunning { .. }) => {}
        other => panic!("a resend from two runs ago: {other:?}"),
    }
    assert_eq!(
        s.list_steps("loop/run-1").await.unwrap()[0].outcome,
        Outcome::Output("1".into())
    );

    // Deleting an ended run is deleting a finished workflow; the workflow is untouched.
    s.delete_workflow("loop/run-0", false).await.unwrap();
    assert_eq!(get(s, "loop").await.status, WorkflowStatus::Enqueued);
}
