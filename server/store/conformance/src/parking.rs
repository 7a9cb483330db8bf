//! Parking cases: a waiting workflow leaves its worker and returns to its queue exactly when its
//! wait resolves.

use super::*;

async fn running(s: &dyn Store, id: &str, now: Millis) {
    start(s, wf(id, "K", "q"), now).await;
    s.renew_session_lease(&session("A"), "A", T + 600_000, now)
        .await
        .unwrap();
    claim_one(s, "A", "K", id, now).await;
}

fn msg(id: &str, to: &str, topic: &str) -> NewMessage {
    NewMessage {
        message_id: id.into(),
        workflow_id: to.into(),
        topic: topic.into(),
        payload: "1".into(),
        idempotency_key: None,
        max_unread: 0,
    }
}

pub async fn parked_workflows_wake_when_their_wait_resolves(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "m", T).await;
    let on = ParkedOn::Message("t".into());
    assert!(s.park(&fence("m", 1), 99, T + 60_000, &on, T + 1).await.unwrap());
    let w = get(s, "m").await;
    assert_eq!(w.status, WorkflowStatus::Delayed);
    // Parked: not claimable, not recovered, whatever happens to its old worker's lease.
    assert!(s
        .claim_workflows(&claim("B", &["K"], &["q"], 10), T + 2)
        .await
        .unwrap()
        .is_empty());
    assert!(s.recover_expired(5, T + 700_000).await.unwrap().requeued.is_empty());
    // A message on another topic changes nothing; one on its topic puts it back in its queue.
    s.send_message(msg("m1", "m", "other"), T + 3).await.unwrap();
    assert_eq!(get(s, "m").await.status, WorkflowStatus::Delayed);
    s.send_message(msg("m2", "m", "t"), T + 4).await.unwrap();
    assert_eq!(get(s, "m").await.status, WorkflowStatus::Enqueued);
    let again = s.claim_workflows(&claim("B", &["K"], &["q"], 10), T + 5).await.unwrap();
    assert_eq!((ids(&again), again[0].workflow.epoch), (vec!["m"], 2));

    // Already resolved: not parked.
    running(s, "r", T).await;
    s.send_message(msg("m3", "r", "t"), T + 1).await.unwrap();
    assert!(!s.park(&fence("r", 1), 99, T + 60_000, &on, T + 2).await.unwrap());
    assert_eq!(get(s, "r").await.status, WorkflowStatus::Pending);

    // Timers.
    running(s, "z", T).await;
    assert!(
        !s.park(&fence("z", 1), 99, T, &ParkedOn::Timer, T + 1).await.unwrap(),
        "already due"
    );
    assert!(s
        .park(&fence("z", 1), 99, T + 1_000, &ParkedOn::Timer, T + 2)
        .await
        .unwrap());
    assert_eq!(s.wake_due(T + 999).await.unwrap(), 0);
    assert_eq!(s.wake_due(T + 1_000).await.unwrap(), 1);
    assert_eq!(get(s, "z").await.status, WorkflowStatus::Enqueued);

    // Events: the workflow setting it wakes the readers parked on it.
    running(s, "reader", T).await;
    running(s, "writer", T).await;
    let event = ParkedOn::Event {
        workflow_id: "writer".into(),
        key: "k".into(),
    };
    assert!(s
        .park(&fence("reader", 1), 99, T + 60_000, &event, T + 1)
        .await
        .unwrap());
    set_event_waking(s, "writer", "other", 0, T + 2).await;
    assert_eq!(get(s, "reader").await.status, WorkflowStatus::Delayed);
    set_event_waking(s, "writer", "k", 1, T + 3).await;
    assert_eq!(get(s, "reader").await.status, WorkflowStatus::Enqueued);

    // Fenced, and a parked workflow can be cancelled.
    running(s, "c", T).await;
    assert!(matches!(
        s.park(&fence("c", 9), 99, T + 60_000, &on, T).await,
        Err(StoreError::StaleEpoch { .. })
    ));
    assert!(s.park(&fence("c", 1), 99, T + 60_000, &on, T).await.unwrap());
    assert_eq!(
        s.cancel_workflow("c", T + 1).await.unwrap().status,
        WorkflowStatus::Cancelled
    );
    s.send_message(msg("m4", "c", "t"), T + 2).await.unwrap();
    assert_eq!(
        get(s, "c").await.status,
        WorkflowStatus::Cancelled,
        "a message does not revive a cancelled workflow"
    );
}

pub async fn parked_parents_wake_when_the_awaited_workflow_finishes(s: Arc<dyn Store>) {
    let s = &*s;
    // Every way of finishing wakes the parked awaiters: completion, cancel, a passed deadline.
    for (n, finish) in ["complete", "cancel", "deadline"].into_iter().enumerate() {
        let (parent, child) = (format!("parent-{finish}"), format!("child-{finish}"));
        let t = T + n as Millis * 10_000;
        running(s, &parent, t).await;
        let c = NewWorkflow {
            deadline_at: Some(t + 5_000),
            ..wf(&child, "C", "q")
        };
        start(s, c, t).await;
        let on = ParkedOn::Workflow(child.clone());
        assert!(s.park(&fence(&parent, 1), 99, Millis::MAX, &on, t + 1).await.unwrap());
        assert_eq!(get(s, &parent).await.status, WorkflowStatus::Delayed);
        match finish {
            "complete" => {
                claim_one(s, "A", "C", &child, t + 2).await;
                s.complete_workflow(&fence(&child, 1), Outcome::Output("1".into()), t + 3)
                    .await
                    .unwrap();
            }
            "cancel" => {
                s.cancel_workflow(&child, t + 3).await.unwrap();
            }
            _ => {
                assert_eq!(s.cancel_expired(t + 5_001).await.unwrap().len(), 1);
            }
        }
        assert_eq!(get(s, &parent).await.status, WorkflowStatus::Enqueued, "{finish}");
        // Parking on a workflow that has already finished does not park.
        claim_one(s, "A", "K", &parent, t + 6_000).await;
        assert!(!s
            .park(&fence(&parent, 2), 99, Millis::MAX, &on, t + 6_001)
            .await
            .unwrap());
    }
    assert!(matches!(
        s.park(
            &fence("parent-complete", 2),
            99,
            Millis::MAX,
            &ParkedOn::Workflow("nobody".into()),
            T + 50_000
        )
        .await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}

/// Sets an event and wakes the workflows parked on it, in one transaction (as the engine does).
async fn set_event_waking(s: &dyn Store, workflow_id: &str, key: &str, step_id: u32, now: Millis) {
    let mut tx = s.begin(now).await.unwrap();
    tx.set_event(workflow_id, key, "1", step_id).await.unwrap();
    let on = ParkedOn::Event {
        workflow_id: workflow_id.into(),
        key: key.into(),
    };
    tx.wake_parked(None, &on).await.unwrap();
    tx.commit(Vec::new()).await.unwrap();
}
