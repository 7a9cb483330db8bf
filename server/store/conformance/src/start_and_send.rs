//! Start-and-send: a workflow started unless its id is taken, and a message delivered to it, in
//! one transaction.

use super::*;

fn keyed(id: &str, key: &str, payload: &str) -> NewMessage {
    NewMessage {
        message_id: id.to_string(),
        // Filled in by the store with the workflow started or found.
        workflow_id: String::new(),
        topic: "orders".to_string(),
        payload: payload.to_string(),
        idempotency_key: Some(key.to_string()),
        max_unread: 0,
    }
}

fn payloads(messages: &[MessageRecord]) -> Vec<&str> {
    messages.iter().map(|m| m.payload.as_str()).collect()
}

pub async fn start_and_send_starts_once_and_delivers_once_per_key(s: Arc<dyn Store>) {
    let s = &*s;
    // The first call starts the workflow, with the message already in its inbox.
    let (started, sent) = s
        .start_and_send(wf("cust-1", "C", "q"), keyed("m1", "k1", "1"), T)
        .await
        .unwrap();
    assert!(started.created);
    assert_eq!(started.workflow.status, WorkflowStatus::Enqueued);
    assert_eq!((sent.message_id.as_str(), sent.duplicate), ("m1", false));
    assert_eq!(payloads(&s.list_messages("cust-1").await.unwrap()), ["1"]);

    // The same call again (a client's retry): nothing new.
    let (again, resent) = s
        .start_and_send(wf("cust-1", "C", "q"), keyed("m1-retry", "k1", "1"), T + 1)
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!((resent.message_id.as_str(), resent.duplicate), ("m1", true));

    // Another message to the running workflow: delivered, no second start.
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "C", "cust-1", T + 2).await;
    let (running, next) = s
        .start_and_send(wf("cust-1", "C", "q"), keyed("m2", "k2", "2"), T + 3)
        .await
        .unwrap();
    assert!(!running.created);
    assert_eq!(running.workflow.status, WorkflowStatus::Pending);
    assert!(!next.duplicate);
    assert_eq!(payloads(&s.list_messages("cust-1").await.unwrap()), ["1", "2"]);
}

pub async fn start_and_send_refused_writes_nothing(s: Arc<dyn Store>) {
    let s = &*s;
    s.start_and_send(wf("cust-2", "C", "q"), keyed("m1", "k1", "1"), T)
        .await
        .unwrap();
    // Another workflow name under the id: neither started nor sent.
    let e = s
        .start_and_send(wf("cust-2", "Other", "q"), keyed("m2", "k2", "2"), T + 1)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::WorkflowIdConflict { .. }), "{e:?}");
    assert_eq!(payloads(&s.list_messages("cust-2").await.unwrap()), ["1"]);

    // A workflow that ended with an outcome takes no more messages.
    s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
    claim_one(s, "A", "C", "cust-2", T + 2).await;
    s.complete_workflow(&fence("cust-2", 1), Outcome::Output("1".into()), T + 3)
        .await
        .unwrap();
    let e = s
        .start_and_send(wf("cust-2", "C", "q"), keyed("m3", "k3", "3"), T + 4)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotRunning { .. }), "{e:?}");
    assert_eq!(payloads(&s.list_messages("cust-2").await.unwrap()), ["1"]);

    // A full inbox refuses the send, and the start with it: no workflow without its message.
    let full = NewMessage {
        max_unread: 1,
        ..keyed("m4", "k4", "4")
    };
    s.start_and_send(wf("cust-3", "C", "q"), full.clone(), T + 5)
        .await
        .unwrap();
    let e = s
        .start_and_send(
            wf("cust-3", "C", "q"),
            NewMessage {
                message_id: "m5".into(),
                idempotency_key: Some("k5".into()),
                ..full
            },
            T + 6,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::InboxFull { .. }), "{e:?}");
    assert_eq!(payloads(&s.list_messages("cust-3").await.unwrap()), ["4"]);
}
