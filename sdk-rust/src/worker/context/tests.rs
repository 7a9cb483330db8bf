//! Replay through the journal, with a connection the test answers by hand: a history answers
//! every call it records without a request; another step at a recorded position is
//! non-determinism; drawn values are recorded as their shapes.

use std::{
    sync::{atomic::AtomicBool, Arc},
    time::{Duration, UNIX_EPOCH},
};

use waymark_proto::{
    json,
    v1::{self, worker_message},
};

use super::WorkflowContext;
use crate::{
    worker::{
        fake::{answer_all, dispatch, fake_conn, recorded},
        records::Records,
    },
    WorkflowError,
};

fn step(step_id: u32, name: &str, output: serde_json::Value) -> v1::Step {
    v1::Step {
        step_id,
        name: name.into(),
        output: Some(json::to_payload(&output)),
        ..Default::default()
    }
}

fn context_over(
    steps: Vec<v1::Step>,
) -> (
    WorkflowContext,
    tokio::sync::mpsc::Receiver<v1::WorkerMessage>,
    Arc<super::Conn>,
) {
    let (conn, requests) = fake_conn(Duration::from_secs(60));
    let d = v1::DispatchWorkflow { steps, ..dispatch() };
    let ctx = WorkflowContext::new(
        &d,
        conn.clone(),
        Arc::new(AtomicBool::new(false)),
        Default::default(),
        Default::default(),
        Arc::new(Records::default()),
        None,
    );
    (ctx, requests, conn)
}

/// Every step record among the messages a worker sent, batched or not.
fn records_in(sent: &[v1::WorkerMessage]) -> Vec<v1::RecordStep> {
    sent.iter()
        .flat_map(|m| match &m.kind {
            Some(worker_message::Kind::RecordStep(r)) => vec![r.clone()],
            Some(worker_message::Kind::Batch(b)) => b
                .messages
                .iter()
                .filter_map(|m| match &m.kind {
                    Some(worker_message::Kind::RecordStep(r)) => Some(r.clone()),
                    _ => None,
                })
                .collect(),
            _ => vec![],
        })
        .collect()
}

fn output(r: &v1::RecordStep) -> serde_json::Value {
    match &r.outcome {
        Some(v1::record_step::Outcome::Output(p)) => json::from_payload(Some(p)).unwrap(),
        other => panic!("{other:?}"),
    }
}

const A_UUID: &str = "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20";

#[tokio::test]
async fn a_recorded_history_is_replayed_without_a_request() {
    let (ctx, mut requests, _conn) = context_over(vec![
        step(0, "charge", serde_json::json!({"ok": true})),
        step(1, "waymark.now", serde_json::json!({"now_ms": 1_234})),
        step(2, "waymark.uuid", serde_json::json!({"uuid": A_UUID})),
        step(3, "waymark.sleep", serde_json::json!({"wake_at_ms": 0})),
        step(4, "waymark.send", serde_json::json!({"message_id": "m-1"})),
        step(5, "waymark.recv.deadline", serde_json::json!({"deadline_ms": 99})),
        step(6, "waymark.recv", serde_json::Value::Null),
    ]);
    let charged: serde_json::Value = ctx
        .step("charge", || async { Err::<serde_json::Value, _>("ran") })
        .await
        .unwrap();
    assert_eq!(charged, serde_json::json!({"ok": true}));
    assert_eq!(ctx.now().await.unwrap(), UNIX_EPOCH + Duration::from_millis(1_234));
    assert_eq!(ctx.uuid().await.unwrap().to_string(), A_UUID);
    ctx.sleep(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(ctx.send("other", "", &1).await.unwrap(), "m-1");
    let got: Option<u32> = ctx.recv("", Duration::from_secs(60)).await.unwrap();
    assert_eq!(got, None, "a recorded null is a timeout");
    assert!(requests.try_recv().is_err(), "a replay sends nothing");
}

#[tokio::test]
async fn another_step_at_a_recorded_position_is_non_determinism() {
    let (ctx, _requests, _conn) = context_over(vec![step(0, "charge", serde_json::json!(1))]);
    let e = ctx.now().await.unwrap_err();
    let WorkflowError::NonDeterminism(message) = e else {
        panic!("{e:?}")
    };
    assert_eq!(
        message,
        r#"workflow "w" called step "waymark.now" at position 0, where its history records "charge""#
    );
}

#[tokio::test]
async fn drawn_values_are_recorded_as_their_shapes_with_the_next_request() {
    let (ctx, requests, conn) = context_over(vec![]);
    let before = std::time::SystemTime::now();
    let now = ctx.now().await.unwrap();
    let id = ctx.uuid().await.unwrap();
    assert!(now >= before - Duration::from_millis(1));
    assert_eq!(id.get_version_num(), 4);
    let (answering, sent) = answer_all(&conn, requests, |_| recorded());
    // The next step flushes what the two drew, in call order.
    let _: u32 = ctx.step("next", || async { Ok::<_, String>(1) }).await.unwrap();
    ctx.send("other", "", &1).await.ok();
    answering.abort();
    let records = records_in(&sent.lock().unwrap());
    let now_ms = now.duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    assert_eq!((records[0].step_id, records[0].name.as_str()), (0, "waymark.now"));
    assert_eq!(output(&records[0]), serde_json::json!({ "now_ms": now_ms }));
    assert_eq!((records[1].step_id, records[1].name.as_str()), (1, "waymark.uuid"));
    assert_eq!(output(&records[1]), serde_json::json!({ "uuid": id.to_string() }));
}

#[tokio::test]
async fn a_run_of_old_code_replays_the_old_branch_and_its_step_keeps_its_position() {
    let (ctx, mut requests, _conn) = context_over(vec![step(0, "charge", serde_json::json!(1))]);
    assert!(
        !ctx.patched("cents").unwrap(),
        "the history was made without the change"
    );
    let charged: u32 = ctx.step("charge", || async { Err::<u32, _>("ran") }).await.unwrap();
    assert_eq!(charged, 1, "the old branch's step replays at the position patched left");
    assert!(requests.try_recv().is_err(), "a replay sends nothing");
}

#[tokio::test]
async fn a_run_of_new_code_records_the_marker_and_replays_the_new_branch() {
    let (ctx, requests, conn) = context_over(vec![]);
    assert!(ctx.patched("cents").unwrap(), "a live run takes the new branch");
    let (answering, sent) = answer_all(&conn, requests, |_| recorded());
    let _: u32 = ctx
        .step("charge-cents", || async { Ok::<_, String>(100) })
        .await
        .unwrap();
    // A request flushes what is held, in call order.
    ctx.send("other", "", &1).await.ok();
    answering.abort();
    let records = records_in(&sent.lock().unwrap());
    assert_eq!((records[0].step_id, records[0].name.as_str()), (0, "waymark.patch"));
    assert_eq!(output(&records[0]), serde_json::json!({ "patch_id": "cents" }));
    assert_eq!((records[1].step_id, records[1].name.as_str()), (1, "charge-cents"));

    let (ctx, mut requests, _conn) = context_over(vec![
        step(0, "waymark.patch", serde_json::json!({"patch_id": "cents"})),
        step(1, "charge-cents", serde_json::json!(100)),
    ]);
    assert!(ctx.patched("cents").unwrap(), "its replay takes the new branch again");
    let charged: u32 = ctx
        .step("charge-cents", || async { Err::<u32, _>("ran") })
        .await
        .unwrap();
    assert_eq!(charged, 100);
    assert!(requests.try_recv().is_err(), "a replay sends nothing");
}
