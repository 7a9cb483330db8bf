//! Messaging cases: sends, receives that consume exactly once, idempotency, fencing.

use super::*;

fn msg(id: &str, to: &str, topic: &str, payload: &str) -> NewMessage {
    NewMessage {
        message_id: id.to_string(),
        workflow_id: to.to_string(),
        topic: topic.to_string(),
        payload: payload.to_string(),
        idempotency_key: None,
        max_unread: 0,
    }
}

/// Takes the oldest unread message on `topic` for the fenced workflow and records it as its
/// step `step_id`, with the table operations a receive is made of, and commits.
pub async fn take(s: &dyn Store, f: &Fence, step_id: u32, topic: &str, now: Millis) -> Option<String> {
    let mut tx = s.begin(now).await.unwrap();
    assert_eq!(
        tx.fence(f, step_id, FenceLock::Shared).await.unwrap(),
        None,
        "step {step_id} is recorded"
    );
    let taken = tx.take_message(&f.workflow_id, topic, step_id).await.unwrap();
    let output = recorded::recv_output(taken.as_deref());
    assert!(tx.record_step(f, step_id, RECV_STEP, &output).await.unwrap());
    tx.commit(Vec::new()).await.unwrap();
    taken
}

/// A running workflow `id` (epoch 1) to receive on.
async fn running(s: &dyn Store, id: &str) {
    start(s, wf(id, "R", "q"), T).await;
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "R", id, T).await;
}

pub async fn send_to_unknown_workflow_is_not_found(s: Arc<dyn Store>) {
    let e = s.send_message(msg("m1", "nobody", "", "1"), T).await.unwrap_err();
    assert!(matches!(e, StoreError::WorkflowNotFound(id) if id == "nobody"));
    assert!(matches!(
        s.list_messages("nobody").await,
        Err(StoreError::WorkflowNotFound(_))
    ));
}

pub async fn send_to_a_workflow_that_ended_with_an_outcome_is_refused(s: Arc<dyn Store>) {
    running(&*s, "done").await;
    let keyed = NewMessage {
        idempotency_key: Some("k".into()),
        ..msg("before", "done", "", "1")
    };
    s.send_message(keyed.clone(), T + 1).await.unwrap();
    s.complete_workflow(&fence("done", 1), Outcome::Output("1".into()), T + 2)
        .await
        .unwrap();
    let e = s.send_message(msg("after", "done", "", "2"), T + 3).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::NotRunning { workflow_id, status } if workflow_id == "done" && *status == WorkflowStatus::Success),
        "{e:?}"
    );
    // A resend of what it did get is still the duplicate it is, not an error.
    let again = s
        .send_message(
            NewMessage {
                message_id: "retry".into(),
                ..keyed
            },
            T + 3,
        )
        .await
        .unwrap();
    assert_eq!((again.message_id.as_str(), again.duplicate), ("before", true));
    // What it had is kept; nothing was added.
    let kept = s.list_messages("done").await.unwrap();
    assert_eq!(
        kept.iter().map(|m| m.message_id.as_str()).collect::<Vec<_>>(),
        ["before"]
    );
    // A cancelled workflow may be resumed, and read what was sent meanwhile: it still takes them.
    start(&*s, wf("paused", "R", "q"), T).await;
    s.cancel_workflow("paused", T + 4).await.unwrap();
    s.send_message(msg("meanwhile", "paused", "", "3"), T + 5)
        .await
        .unwrap();
}

pub async fn a_full_inbox_refuses_sends_until_one_is_read(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "full").await;
    let capped = |id: &str, topic: &str| NewMessage {
        max_unread: 2,
        ..msg(id, "full", topic, "1")
    };
    s.send_message(capped("m1", "a"), T + 1).await.unwrap();
    // The limit counts the whole inbox, every topic.
    s.send_message(capped("m2", "b"), T + 2).await.unwrap();
    let e = s.send_message(capped("m3", "a"), T + 3).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::InboxFull { workflow_id, limit: 2 } if workflow_id == "full"),
        "{e:?}"
    );
    // A keyed resend of a message that got in is still answered as its duplicate.
    let keyed = NewMessage {
        idempotency_key: Some("k".into()),
        ..capped("m4", "a")
    };
    let e = s.send_message(keyed.clone(), T + 4).await.unwrap_err();
    assert!(matches!(e, StoreError::InboxFull { .. }), "{e:?}");
    assert_eq!(s.list_messages("full").await.unwrap().len(), 2, "nothing was added");
    // Reading one makes room for one.
    assert_eq!(take(s, &fence("full", 1), 0, "a", T + 5).await.as_deref(), Some("1"));
    let sent = s.send_message(keyed.clone(), T + 6).await.unwrap();
    assert!(!sent.duplicate);
    let again = s
        .send_message(
            NewMessage {
                message_id: "m5".into(),
                ..keyed
            },
            T + 7,
        )
        .await
        .unwrap();
    assert_eq!((again.message_id.as_str(), again.duplicate), ("m4", true));
    // Without a limit nothing is counted.
    s.send_message(msg("m6", "full", "a", "1"), T + 8).await.unwrap();
    assert_eq!(s.list_messages("full").await.unwrap().len(), 4);
}

pub async fn sends_with_one_idempotency_key_deliver_once(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "r").await;
    let keyed = |id: &str| NewMessage {
        idempotency_key: Some("k".into()),
        ..msg(id, "r", "t", "1")
    };
    let first = s.send_message(keyed("m1"), T).await.unwrap();
    let again = s.send_message(keyed("m2"), T + 1).await.unwrap();
    assert_eq!((first.duplicate, again.duplicate), (false, true));
    assert_eq!(again.message_id, "m1");
    assert_eq!(s.list_messages("r").await.unwrap().len(), 1);
    // The same key to another workflow is another message.
    running(s, "r2").await;
    let other = s
        .send_message(
            NewMessage {
                workflow_id: "r2".into(),
                ..keyed("m3")
            },
            T,
        )
        .await
        .unwrap();
    assert!(!other.duplicate);
}

/// Many receivers at once (distinct steps of one workflow, as concurrent recv calls or a
/// zombie and its successor would be): every message is taken exactly once.
pub async fn concurrent_receivers_take_each_message_once(s: Arc<dyn Store>) {
    running(&*s, "r").await;
    for i in 0..40 {
        s.send_message(msg(&format!("m{i:02}"), "r", "t", &i.to_string()), T + i)
            .await
            .unwrap();
    }
    let next_step = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (s, next_step) = (s.clone(), next_step.clone());
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let step_id = next_step.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                match take(&*s, &fence("r", 1), step_id, "t", T + 100).await {
                    Some(p) => got.push(p),
                    None => return got,
                }
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_by_key(|p| p.parse::<u32>().unwrap());
    assert_eq!(all, (0..40).map(|i| i.to_string()).collect::<Vec<_>>());
    assert!(s
        .list_messages("r")
        .await
        .unwrap()
        .iter()
        .all(|m| m.consumed_at.is_some()));
}

pub async fn a_send_completes_a_waiting_receive_in_its_transaction(s: Arc<dyn Store>) {
    let s = &*s;
    running(s, "r").await;
    let f = fence("r", 1);
    let later = T + 60_000;
    let waiter = |step_id| RecvWaiter {
        fence: f.clone(),
        step_id,
        deadline: later,
    };
    let (sent, delivered) = s
        .send_message_delivering(msg("m1", "r", "t", "1"), &waiter(0), T + 2)
        .await
        .unwrap();
    assert_eq!((sent.duplicate, delivered.as_deref()), (false, Some("1")));
    let m = &s.list_messages("r").await.unwrap()[0];
    assert_eq!((m.consumed_at, m.consumed_by_step), (Some(T + 2), Some(0)));
    // A park racing the delivery (the worker had decided to let go) sees it resolved.
    let on = ParkedOn::Message("t".into());
    assert!(!s.park(&f, 0, later, &on, T + 2).await.unwrap());
    // The receipt is recorded as the receive's step.
    let recorded = &s.list_steps("r").await.unwrap()[0];
    assert_eq!(
        (recorded.step_id, recorded.name.as_str(), &recorded.outcome),
        (0, RECV_STEP, &Outcome::Output(recorded::recv_output(Some("1"))))
    );
    // An older message on the topic goes first; the new one waits for the next receive.
    s.send_message(msg("m2", "r", "t", "2"), T + 4).await.unwrap();
    let (_, delivered) = s
        .send_message_delivering(msg("m3", "r", "t", "3"), &waiter(1), T + 5)
        .await
        .unwrap();
    assert_eq!(delivered.as_deref(), Some("2"));
    assert_eq!(take(s, &f, 2, "t", T + 6).await.as_deref(), Some("3"));
    // Nothing is delivered to a waiter that moved on: its step is recorded, its deadline passed,
    // or it is another dispatch's. The message is still sent.
    let stale = [
        waiter(2),
        RecvWaiter {
            deadline: T + 7,
            ..waiter(3)
        },
        RecvWaiter {
            fence: fence("r", 7),
            ..waiter(3)
        },
    ];
    for (i, w) in stale.iter().enumerate() {
        let (sent, delivered) = s
            .send_message_delivering(msg(&format!("x{i}"), "r", "t", "9"), w, T + 8)
            .await
            .unwrap();
        assert_eq!((sent.duplicate, delivered), (false, None), "waiter {i}");
    }
    let unconsumed = s
        .list_messages("r")
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.consumed_at.is_none())
        .count();
    assert_eq!(unconsumed, 3);
    assert_eq!(s.list_steps("r").await.unwrap().len(), 3);
    // A duplicate send (same idempotency key) delivers nothing.
    let keyed = |id: &str| NewMessage {
        idempotency_key: Some("k".into()),
        ..msg(id, "r", "u", "5")
    };
    s.send_message(keyed("k1"), T + 9).await.unwrap();
    let (sent, delivered) = s
        .send_message_delivering(keyed("k2"), &waiter(3), T + 10)
        .await
        .unwrap();
    assert_eq!(
        (sent.message_id.as_str(), sent.duplicate, delivered),
        ("k1", true, None)
    );
    // A receiver that does not exist is not found, whichever path the send takes.
    let nobody = RecvWaiter {
        fence: fence("nobody", 1),
        ..waiter(0)
    };
    let err = s
        .send_message_delivering(msg("n1", "nobody", "t", "1"), &nobody, T + 11)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::WorkflowNotFound(ref id) if id == "nobody"),
        "{err:?}"
    );
}

/// Many sends at once to one waiting receive: exactly one of them completes it, with the
/// payload its step records; every other message stays unread for the receives after it.
pub async fn concurrent_delivering_sends_complete_a_receive_once(s: Arc<dyn Store>) {
    running(&*s, "r").await;
    let waiter = RecvWaiter {
        fence: fence("r", 1),
        step_id: 0,
        deadline: T + 60_000,
    };
    let mut tasks = Vec::new();
    for i in 0..8 {
        let (s, waiter) = (s.clone(), waiter.clone());
        tasks.push(tokio::spawn(async move {
            let m = msg(&format!("m{i}"), "r", "t", &i.to_string());
            s.send_message_delivering(m, &waiter, T + 1).await.unwrap()
        }));
    }
    let mut delivered = Vec::new();
    for t in tasks {
        let (sent, got) = t.await.unwrap();
        assert!(!sent.duplicate);
        delivered.extend(got);
    }
    assert_eq!(delivered.len(), 1, "{delivered:?}");
    let steps = s.list_steps("r").await.unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(
        steps[0].outcome,
        Outcome::Output(recorded::recv_output(Some(&delivered[0])))
    );
    let messages = s.list_messages("r").await.unwrap();
    assert_eq!(messages.len(), 8);
    let consumed: Vec<_> = messages.iter().filter(|m| m.consumed_at.is_some()).collect();
    assert_eq!(consumed.len(), 1);
    assert_eq!(
        (consumed[0].payload.as_str(), consumed[0].consumed_by_step),
        (delivered[0].as_str(), Some(0))
    );
}

/// The send that ends a waiting receive refuses what a plain send refuses: a receiver that
/// ended with an outcome, and a full inbox whether or not the receive still waits.
pub async fn a_delivering_send_refuses_what_a_plain_send_refuses(s: Arc<dyn Store>) {
    let s = &*s;
    let later = T + 60_000;
    let waiter = |id: &str, epoch, step_id| RecvWaiter {
        fence: fence(id, epoch),
        step_id,
        deadline: later,
    };
    running(s, "done").await;
    s.complete_workflow(&fence("done", 1), Outcome::Output("1".into()), T + 1)
        .await
        .unwrap();
    let e = s
        .send_message_delivering(msg("late", "done", "t", "1"), &waiter("done", 1, 0), T + 2)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::NotRunning { workflow_id, status } if workflow_id == "done" && *status == WorkflowStatus::Success),
        "{e:?}"
    );
    assert!(s.list_messages("done").await.unwrap().is_empty(), "nothing was added");

    running(s, "full").await;
    let capped = |id: &str| NewMessage {
        max_unread: 1,
        ..msg(id, "full", "t", "1")
    };
    s.send_message(capped("m1"), T + 3).await.unwrap();
    // The waiter moved on (another dispatch's fence): the send is a plain one, and the inbox
    // is full.
    let e = s
        .send_message_delivering(capped("m2"), &waiter("full", 7, 0), T + 4)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::InboxFull { workflow_id, limit: 1 } if workflow_id == "full"),
        "{e:?}"
    );
    assert_eq!(s.list_messages("full").await.unwrap().len(), 1, "nothing was added");
    // The same when the receive does wait, on a topic with nothing unread: the inbox counts
    // every topic.
    let other_topic = NewMessage {
        max_unread: 1,
        ..msg("m3", "full", "u", "1")
    };
    let e = s
        .send_message_delivering(other_topic, &waiter("full", 1, 0), T + 5)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::InboxFull { workflow_id, limit: 1 } if workflow_id == "full"),
        "{e:?}"
    );
    assert_eq!(s.list_messages("full").await.unwrap().len(), 1, "nothing was added");
    assert!(
        s.list_steps("full").await.unwrap().is_empty(),
        "the receive still waits"
    );
}
